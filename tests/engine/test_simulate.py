"""Simulator bookkeeping: GPU-seconds conserved, no job lost, completions free resources,
evictions restart jobs; traces and the command line (no timing assertions)."""

from __future__ import annotations

import json
import math

import pytest

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState
from scheduler.simulate import (
    Arrival,
    SimResult,
    generate,
    read_csv,
    read_yaml,
    simulate,
    to_csv,
    with_quotas,
)
from scheduler.simulate.__main__ import main as sim_main
from scheduler.simulate.trace import TraceError


def queue(name: str, quota: float, parent: str | None = None, index: int = 0) -> Queue:
    return Queue(name, parent=parent, created_index=index, resources={"gpu": QueueResource(quota)})


def cluster(n_nodes: int = 2, gpus: int = 8, queues: tuple[str, ...] = ("a", "b", "c")) -> Snapshot:
    cap = n_nodes * gpus
    qs = [queue(q, cap // len(queues), index=i) for i, q in enumerate(queues)]
    return Snapshot([Node(f"n{i}", gpus=gpus) for i in range(n_nodes)], qs)


def assert_bookkeeping(res: SimResult, arrivals: list[Arrival]) -> None:
    # every arrival is accounted for, in a known state
    names = [a.name or f"job-{i:05d}" for i, a in enumerate(arrivals)]
    assert set(names) <= set(res.jobs)
    assert all(res.jobs[n].state in ("finished", "running", "pending") for n in names)
    assert sum(res.counts().values()) == len(res.jobs)
    # GPU-seconds: sum of task GPUs x run time equals the integral of the allocation
    assert res.gpu_seconds_allocated() == pytest.approx(res.gpu_seconds_run(), rel=1e-9, abs=1e-6)
    # the allocation never exceeds the cluster nor goes negative
    assert all(-1e-9 <= v <= res.capacity_gpu + 1e-9 for _, v in res.allocation)
    times = [t for t, _ in res.allocation]
    assert times == sorted(times) and times[-1] <= res.end_s
    for j in res.jobs.values():
        if j.state == "finished":
            assert j.end_s is not None and j.first_start_s is not None and j.first_start_s >= j.submit_s
            if j.restarts == 0:  # ran once, for exactly its duration
                assert j.gpu_seconds == pytest.approx(j.gpu * j.duration_s)
                assert j.end_s - j.first_start_s == pytest.approx(j.duration_s)


def test_generated_trace_conserves_gpu_seconds_and_loses_no_job() -> None:
    arrivals = generate(["a", "b", "c"], 16, horizon_s=5400, load=1.5, median_duration_s=900, seed=3)
    assert len(arrivals) > 20
    res = simulate(cluster(), arrivals, 60)
    assert_bookkeeping(res, arrivals)
    assert res.counts()["finished"] == len(arrivals)  # run to the end: everything finishes


def test_stopping_early_keeps_running_and_pending_jobs() -> None:
    arrivals = generate(["a", "b", "c"], 16, horizon_s=5400, load=2.0, median_duration_s=1800, seed=4)
    res = simulate(cluster(), arrivals, 60, until_s=3000)
    assert res.end_s == 3000
    counts = res.counts()
    assert counts["running"] > 0 and counts["pending"] > 0
    submitted = [a for a in arrivals if a.submit_s <= 3000]
    assert len(res.jobs) == len(submitted)
    assert_bookkeeping(res, submitted)


def test_completions_free_resources() -> None:
    snap = Snapshot([Node("n0", gpus=1)], [queue("a", 1)])
    arrivals = [Arrival(0, "a", duration_s=95, name="first"), Arrival(0, "a", duration_s=100, name="second")]
    res = simulate(snap, arrivals, 10)
    first, second = res.jobs["first"], res.jobs["second"]
    assert (first.first_start_s, first.end_s) == (0, 95)
    assert (second.first_start_s, second.end_s) == (100, 200)  # the next cycle after the GPU came free
    assert second.wait_s == 100
    assert max(v for _, v in res.allocation) == 1
    assert res.allocation[-1] == (200, 0)
    assert_bookkeeping(res, arrivals)


def test_initial_jobs_and_durations() -> None:
    running = Job(
        "old",
        "a",
        tasks=[Task("old-0", job="old", gpu=2, state=TaskState.RUNNING, node="n0")],
        last_start_s=600,
    )
    waiting = Job("queued", "a", tasks=[Task("queued-0", job="queued", gpu=2)])
    snap = Snapshot([Node("n0", gpus=2)], [queue("a", 2)], [running, waiting])
    res = simulate(snap, [], 10, durations={"old": 50, "queued": 30})
    assert res.jobs["old"].end_s == 50 and res.jobs["old"].first_start_s == -600
    assert res.estimated_start("queued") == 50 and res.jobs["queued"].end_s == 80
    assert res.gpu_seconds_allocated() == pytest.approx(2 * 50 + 2 * 30)


def test_eviction_restarts_the_job_and_is_counted() -> None:
    # queue a (no quota) holds the whole node with jobs that never end; b deserves it all
    jobs = [
        Job(
            f"a{k}",
            "a",
            tasks=[Task(f"a{k}-0", job=f"a{k}", gpu=1, state=TaskState.RUNNING, node="n0", gpu_devices=(k,))],
            last_start_s=3600,
        )
        for k in range(8)
    ]
    snap = Snapshot([Node("n0", gpus=8)], [queue("a", 0, index=0), queue("b", 8, index=1)], jobs)
    arrivals = [Arrival(20, "b", tasks=1, gpu=8, duration_s=100, name="big")]
    res = simulate(snap, arrivals, 10, until_s=400)
    big = res.jobs["big"]
    assert big.first_start_s is not None and big.end_s == big.first_start_s + 100
    assert len(res.evictions) == 8 and {e.queue for e in res.evictions} == {"a"}
    assert all(e.reason == "reclaim" for e in res.evictions)
    assert sum(j.restarts for j in res.jobs.values()) == 8
    # the reclaimed jobs came back once the big job finished
    assert all(res.jobs[f"a{k}"].state == "running" for k in range(8))
    assert_bookkeeping(res, arrivals)


def test_deterministic_and_fast_forward_changes_nothing() -> None:
    arrivals = generate(["a", "b", "c"], 16, horizon_s=1800, load=1.2, median_duration_s=600, seed=5)
    a = simulate(cluster(), arrivals, 30)
    b = simulate(cluster(), arrivals, 30)
    c = simulate(cluster(), arrivals, 30, fast_forward=False)
    ja, jb = a.to_json(), b.to_json()
    ja["summary"].pop("engine_seconds"), jb["summary"].pop("engine_seconds")  # wall time, not an outcome
    assert ja == jb
    starts = {n: (j.first_start_s, j.end_s, j.restarts) for n, j in a.jobs.items()}
    assert starts == {n: (j.first_start_s, j.end_s, j.restarts) for n, j in c.jobs.items()}
    assert c.gpu_seconds_allocated() == pytest.approx(a.gpu_seconds_allocated())


def test_fairness_and_wait_reports() -> None:
    arrivals = generate(["a", "b", "c"], 16, horizon_s=5400, load=2.0, median_duration_s=900, seed=6)
    res = simulate(cluster(), arrivals, 60, until_s=5400)
    fair = res.fairness(since_s=1800)
    assert set(fair["queues"]) == {"a", "b", "c"}
    assert 0 < fair["jain"] <= 1 and fair["max_abs_dev"] >= fair["mean_abs_dev"] >= 0
    waits = res.wait_stats()
    assert sum(w["jobs"] for w in waits.values()) == len(res.jobs)
    for w in waits.values():
        if w["started"]:
            assert w["median_s"] <= w["p95_s"]
    json.dumps(res.to_json())  # serialisable


def test_what_if_quota_changes_only_the_quota() -> None:
    snap = cluster()
    changed = with_quotas(snap, {"a": 10})
    assert changed.queues[0].res("gpu").quota == 10 and snap.queues[0].res("gpu").quota == 5
    with pytest.raises(ValueError):
        with_quotas(snap, {"nope": 1})


def test_trace_round_trip_and_errors() -> None:
    arrivals = generate(["a", "b"], 16, horizon_s=1800, seed=2)
    assert read_csv(to_csv(arrivals)) == arrivals
    text = "arrivals:\n  - {submit_s: 5, queue: a, gpu: 0.5, duration_s: 60}\nnodes: [{name: n0, gpus: 1}]\n"
    parsed, cluster_data = read_yaml(text)
    assert parsed == [Arrival(5, "a", gpu=0.5, duration_s=60)]
    assert cluster_data == {"nodes": [{"name": "n0", "gpus": 1}]}
    with pytest.raises(TraceError, match="unknown column"):
        read_csv("submit_s,queue,colour\n1,a,red\n")
    with pytest.raises(TraceError, match="missing queue"):
        read_csv("submit_s,queue\n1,\n")
    with pytest.raises(TraceError):
        read_csv("submit_s,queue,gpu\n1,a,1.5\n")


def test_command_line(tmp_path, capsys) -> None:
    trace = tmp_path / "trace.csv"
    assert (
        sim_main(
            [
                "generate",
                "--queues",
                "a,b",
                "--nodes",
                "1",
                "--gpus",
                "4",
                "--horizon",
                "1800",
                "-o",
                str(trace),
            ]
        )
        == 0
    )
    out = tmp_path / "sim.json"
    assert (
        sim_main(
            [
                str(trace),
                "--nodes",
                "1",
                "--gpus",
                "4",
                "--step",
                "60",
                "--set-quota",
                "a=4",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "wait p50" in text and "what-if a quota 4" in text
    data = json.loads(out.read_text())
    assert set(data) == {"baseline", "what-if a quota 4"}
    s = data["baseline"]["summary"]
    assert math.isclose(s["gpu_seconds_run"], s["gpu_seconds_allocated"], rel_tol=1e-9, abs_tol=1e-3)


def test_allocate_only_config_is_respected() -> None:
    arrivals = [Arrival(0, "a", gpu=1, duration_s=30)]
    res = simulate(cluster(1, 1, ("a",)), arrivals, 10, config=Config(actions=("allocate",)))
    assert res.jobs["job-00000"].end_s == 30


def test_should_stop_ends_the_run_early_with_what_it_found_so_far() -> None:
    """A wall-clock budget (here a counter) stops the run before a cycle; the result says so."""
    arrivals = [Arrival(submit_s=10.0 * i, queue="a", gpu=8, tasks=1, duration_s=100.0) for i in range(6)]
    full = simulate(cluster(n_nodes=1), arrivals, 10.0)
    asked: list[int] = []

    def after_three() -> bool:
        asked.append(len(asked))
        return len(asked) > 3

    cut = simulate(cluster(n_nodes=1), arrivals, 10.0, should_stop=after_three)
    assert not full.stopped and cut.stopped
    assert cut.cycles == 4 and len(asked) == 4  # asked before every cycle but the first
    assert cut.end_s < full.end_s
    # What it found is exact: the jobs it started, it started when the full run did.
    started = {n: r.first_start_s for n, r in cut.jobs.items() if r.first_start_s is not None}
    assert started and all(full.jobs[n].first_start_s == s for n, s in started.items())
    assert any(r.first_start_s is None for r in cut.jobs.values())
