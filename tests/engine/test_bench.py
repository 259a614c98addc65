"""The benchmark's workloads, answer checks, runner and packing solver (no timing assertions)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from scheduler import Config, CycleResult, Snapshot, TaskOutcome, TaskState, run_cycle
from scheduler.bench import workloads as wl
from scheduler.bench.__main__ import main as bench_main
from scheduler.bench.runner import run_workload
from scheduler.result import Eviction


def leaves(snap: Snapshot) -> list[str]:
    parents = {q.parent for q in snap.queues if q.parent}
    return [q.name for q in snap.queues if q.name not in parents]


# ---- shapes --------------------------------------------------------------------------------------


def test_allocate_shape() -> None:
    snap = wl.allocate_snapshot(10, 50)
    assert [n.gpus for n in snap.nodes] == [8] * 10
    assert len(snap.queues) == 6 and len(leaves(snap)) == 4
    for q in snap.queues:
        expected = 40 if q.parent is None else 20  # departments a half, leaves a quarter of 80 GPUs
        assert q.res("gpu").quota == expected and q.res("gpu").over_quota_weight == 1
    assert len(snap.jobs) == 50
    for i, j in enumerate(snap.jobs):
        assert j.queue == f"queue-{i % 4}" and j.priority == 50 and j.is_preemptible
        assert [(t.gpu, t.state) for t in j.tasks] == [(1.0, TaskState.PENDING)]


def test_full_cycle_shape() -> None:
    snap = wl.full_cycle_snapshot(10, 50)
    for i, j in enumerate(snap.jobs):
        t = j.tasks[0]
        if i % 2 == 0:
            assert t.state == TaskState.RUNNING and t.node == snap.nodes[i % 10].name
        else:
            assert t.state == TaskState.PENDING and t.node is None
    per_device = Counter((t.node, d) for j in snap.jobs for t in j.tasks for d in t.gpu_devices)
    assert per_device and max(per_device.values()) == 1


def test_queue_tree_and_gang_shapes() -> None:
    snap = wl.many_queues_snapshot()
    assert len(snap.nodes) == 50 and len(snap.jobs) == 200
    assert len([q for q in snap.queues if q.parent is None]) == 5 and len(leaves(snap)) == 20
    assert {j.queue for j in snap.jobs} == set(leaves(snap))
    gangs = wl.gangs_snapshot()
    assert len(gangs.jobs) == 100 and all(len(j.tasks) == 4 and j.gang_min == 4 for j in gangs.jobs)
    assert sum(t.gpu for j in gangs.jobs for t in j.tasks) == 50 * 8


def test_reclaim_shapes() -> None:
    snap = wl.reclaim_snapshot(10)
    victims = [j for j in snap.jobs if j.queue == "victim"]
    gang = next(j for j in snap.jobs if j.name == "gang")
    assert len(victims) == 80 and all(j.tasks[0].state == TaskState.RUNNING for j in victims)
    assert len(gang.tasks) == 5 and all(t.gpu == 8 for t in gang.tasks)
    quotas = {q.name: q.res("gpu").quota for q in snap.queues}
    assert quotas["victim"] == 0 and quotas["reclaimer"] == 80
    unplaceable = wl.reclaim_snapshot(100, victim_quota=800 - 79, gang_tasks=10)
    gang = next(j for j in unplaceable.jobs if j.name == "gang")
    assert sum(t.gpu for t in gang.tasks) == 80
    assert {q.name: q.res("gpu").quota for q in unplaceable.queues}["victim"] == 721


def test_stress_shape_scaled_down() -> None:
    snap = wl.stress_snapshot(n_nodes=60, running=400, pending=100)
    assert len(snap.queues) == 100
    depth = {}
    by_name = {q.name: q for q in snap.queues}
    for q in snap.queues:
        d, p = 1, q.parent
        while p:
            d, p = d + 1, by_name[p].parent
        depth[q.name] = d
    assert max(depth.values()) == 3 and len(leaves(snap)) == 84
    size = wl.size_of(snap)
    assert size["running_tasks"] == 400 and size["pending_tasks"] == 100


def test_every_workload_is_named_once_and_quick_ones_exist() -> None:
    ws = wl.all_workloads()
    assert len({w.name for w in ws}) == len(ws)
    groups = {w.group for w in ws}
    assert {"allocate", "full-cycle", "queues-gangs", "reclaim", "unplaceable", "stress"} <= groups
    assert any(w.quick for w in ws) and not any(w.quick for w in ws if w.group == "stress")


# ---- answer checks -------------------------------------------------------------------------------


def outcome(
    name: str, status: TaskState, node: str | None = None, devices: tuple[int, ...] = ()
) -> TaskOutcome:
    return TaskOutcome(name, name.rsplit("-", 1)[0], status, node, devices)


def test_checks_accept_the_engine_answer() -> None:
    snap = wl.allocate_snapshot(10, 50)
    assert wl.all_allocated(50)(snap, run_cycle(snap, wl.ALLOCATE_ONLY)).ok
    snap = wl.reclaim_snapshot(10)
    check = wl.gang_reclaim("gang", 40, "victim")(snap, run_cycle(snap, wl.ALL_ACTIONS))
    assert check.ok, check.detail
    snap = wl.reclaim_snapshot(10, victim_quota=80 - 79, gang_tasks=10)
    check = wl.gang_unplaceable("gang")(snap, run_cycle(snap, wl.ALL_ACTIONS))
    assert check.ok, check.detail


def test_all_allocated_detects_wrong_answers() -> None:
    snap = wl.allocate_snapshot(10, 4)
    good = run_cycle(snap, wl.ALLOCATE_ONLY)
    assert wl.all_allocated(4)(snap, good).ok
    assert not wl.all_allocated(5)(snap, good).ok  # a count that is not the answer
    missing = CycleResult(tasks=dict(good.tasks))
    missing.tasks["job-00000-0"] = outcome("job-00000-0", TaskState.PENDING)
    assert "allocated 3" in wl.all_allocated(4)(snap, missing).detail
    clash = CycleResult(
        tasks={
            t.name: outcome(t.name, TaskState.ALLOCATED, "node-00000", (0,))
            for j in snap.jobs
            for t in j.tasks
        }
    )
    check = wl.all_allocated(4)(snap, clash)
    assert not check.ok and "double-booked" in check.detail
    # a Pipelined task on a device a Running task keeps is a clash too (issue 17)
    names = [t.name for j in snap.jobs for t in j.tasks]
    piped = CycleResult(tasks=dict(good.tasks))
    held = good.tasks[names[0]]
    piped.tasks[names[1]] = outcome(names[1], TaskState.PIPELINED, held.node, held.gpu_devices)
    assert "double-booked" in (wl._overcommit(snap, piped) or "")
    evicted = CycleResult(
        tasks=dict(good.tasks), evictions=[Eviction("x-0", "x", "queue-0", "reclaim", "evicted")]
    )
    assert "evicted 1" in wl.all_allocated(4)(snap, evicted).detail


def test_partly_started_gang_is_caught() -> None:
    snap = wl.gangs_snapshot(n_nodes=1, n_jobs=1, tasks=4)
    res = CycleResult(
        tasks={
            f"job-00000-{k}": outcome(
                f"job-00000-{k}", TaskState.ALLOCATED if k < 2 else TaskState.PENDING, "node-00000", (k,)
            )
            for k in range(4)
        }
    )
    check = wl.all_allocated(2)(snap, res)
    assert not check.ok and "started partly" in check.detail


def test_reclaim_checks_detect_wrong_answers() -> None:
    snap = wl.reclaim_snapshot(10)
    gang_tasks = [t.name for j in snap.jobs if j.name == "gang" for t in j.tasks]

    def result(status: TaskState, n_victims: int, queue_prefix: str = "victim") -> CycleResult:
        tasks = {
            n: outcome(n, status, "node-00000" if status != TaskState.PENDING else None) for n in gang_tasks
        }
        ev = [
            Eviction(f"{queue_prefix}-{k:06d}-0", f"{queue_prefix}-{k:06d}", "victim", "reclaim", "evicted")
            for k in range(n_victims)
        ]
        return CycleResult(tasks=tasks, evictions=ev)

    check = wl.gang_reclaim("gang", 40, "victim")
    assert check(snap, result(TaskState.PIPELINED, 40)).ok
    assert "39 victims" in check(snap, result(TaskState.PIPELINED, 39)).detail
    assert "41 victims" in check(snap, result(TaskState.PIPELINED, 41)).detail
    assert "gang placed 0/5" in check(snap, result(TaskState.PENDING, 40)).detail
    assert "outside victim" in check(snap, result(TaskState.PIPELINED, 40, "other")).detail
    moved = result(TaskState.PIPELINED, 40)
    moved.evictions.append(Eviction("v-0", "victim-x", "victim", "consolidation", "moved", moved_to="node-1"))
    assert check(snap, moved).ok  # a task moved elsewhere is not a victim

    unplaceable = wl.gang_unplaceable("gang")
    assert unplaceable(snap, result(TaskState.PENDING, 0)).ok
    assert not unplaceable(snap, result(TaskState.PENDING, 3)).ok
    assert not unplaceable(snap, result(TaskState.PIPELINED, 0)).ok


# ---- runner and command line ----------------------------------------------------------------------


def test_quick_smoke_writes_the_json_structure(tmp_path) -> None:
    out = tmp_path / "results.json"
    readme = tmp_path / "README.md"
    rc = bench_main(
        [
            "--only",
            "allocate-10n-50j",
            "--reps",
            "1",
            "--no-quality",
            "--no-isolate",
            "--out",
            str(out),
            "--readme",
            str(readme),
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert {"mode", "machine", "workloads", "duration_s", "all_correct"} <= set(data)
    assert {"cpu", "cores", "python", "date"} <= set(data["machine"])
    (row,) = data["workloads"]
    assert row["name"] == "allocate-10n-50j" and row["status"] == "ok" and row["reps"] == 1
    assert row["size"] == {
        "nodes": 10,
        "gpus": 80,
        "queues": 6,
        "jobs": 50,
        "running_tasks": 0,
        "pending_tasks": 50,
    }
    assert set(row["cycle_ms"]) == {"median", "p95", "min"}
    assert row["decisions"] == 50 and row["check"]["ok"] is True and data["all_correct"] is True
    for key in ("build_ms", "session_ms", "decisions_per_s", "peak_rss_mib"):
        assert row[key] is not None
    text = readme.read_text()
    assert "allocate-10n-50j" in text and "| OK |" in text


def test_isolated_run_and_timeout_is_recorded() -> None:
    ok = run_workload(wl.all_workloads()[0], reps=1, timeout_s=60)
    assert ok["status"] == "ok" and ok["check"]["ok"]

    def slow() -> Snapshot:
        time.sleep(30)
        return wl.allocate_snapshot(1, 1)

    hung = wl.Workload("x", "hangs", slow, Config(actions=("allocate",)), wl.all_allocated(1), timeout_s=0.5)
    row = run_workload(hung, reps=1, timeout_s=0.5)
    assert row["status"] == "timeout" and row["reps"] == 0 and row["check"]["ok"] is False


def test_error_in_a_workload_is_recorded() -> None:
    def broken() -> Snapshot:
        raise RuntimeError("boom")

    w = wl.Workload("x", "broken", broken, Config(actions=("allocate",)), wl.all_allocated(1))
    row = run_workload(w, reps=1, isolate=False)
    assert row["status"] == "error" and "boom" in row["error"]


# ---- packing-quality solver ------------------------------------------------------------------------


def test_packing_solver_finds_the_known_optimum() -> None:
    pytest.importorskip("ortools")
    from scheduler.bench.quality import PackingInstance, engine_gpus, optimum_gpus
    from scheduler.model import Job, Node, Task

    def job(name: str, gpu: float, n: int = 1, age: float = 0) -> Job:
        return Job(
            name, "queue-0", tasks=[Task(f"{name}-{k}", job=name, gpu=gpu) for k in range(n)], created_s=age
        )

    # 4 GPUs; jobs of 3, 2, 2 (oldest first): first come first served takes 3, the optimum is 2 + 2
    inst = PackingInstance([Node("n0", gpus=4)], [job("a", 3, age=3), job("b", 2, age=2), job("c", 2, age=1)])
    assert optimum_gpus(inst) == (4.0, True)
    assert optimum_gpus(inst, respect_order=True) == (3.0, True)
    assert engine_gpus(inst) == (3.0, None)
    # fractions share a device up to one GPU: 0.5 + 0.5 fit, 0.75 does not join them
    frac = PackingInstance(
        [Node("n0", gpus=1)], [job("a", 0.75, age=3), job("b", 0.5, age=2), job("c", 0.5, age=1)]
    )
    assert optimum_gpus(frac) == (1.0, True)
    # a gang is all or nothing: 2 x 2 GPUs over two 2-GPU nodes, plus a 3-GPU job that fits nowhere
    gang = PackingInstance([Node("n0", gpus=2), Node("n1", gpus=2)], [job("g", 2, n=2), job("big", 3)])
    assert optimum_gpus(gang) == (4.0, True)
