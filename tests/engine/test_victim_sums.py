"""Reclaim's screen from per-leaf victim sums (``actions.reclaim.victim_sums``, ``reclaim.gain``'s
``quick_screen``) gives "no victims" / "no scenario" exactly when the job-by-job screen
(``candidates``, ``victim_chunks``, ``max_gain``) does, and otherwise hands the job on.

Compared on random clusters: elastic gangs (surplus pods give one at a time), gangs above and at
their minimum, fractional and odd amounts (no exact sums: the screen must step aside), minimum
runtimes, taints and node selectors, non-preemptible and sub-group victims.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState
from scheduler.actions.reclaim import action as reclaim_action
from scheduler.actions.solvers import loop, victim_order
from scheduler.actions.solvers.policy import ActionPolicy
from scheduler.bench import workloads
from scheduler.model import SubGroup, Taint
from scheduler.session import Session
from tests.engine.answers import ACTIONS, cycle_answer


def _verdicts(monkeypatch: pytest.MonkeyPatch, snap: Snapshot) -> tuple[str, Counter[str | None]]:
    """The cycle's answer with the quick screen on, and what the quick screen said."""
    said: Counter[str | None] = Counter()
    real = loop.run_action

    def spying(session: Session, policy: ActionPolicy) -> None:
        quick_screen = policy.quick_screen

        def quick(job: Job, tasks: list[Task]) -> str | None:
            assert quick_screen is not None
            verdict = quick_screen(job, tasks)
            said[verdict] += 1
            return verdict

        real(session, dataclasses.replace(policy, quick_screen=quick if quick_screen is not None else None))

    with monkeypatch.context() as m:
        m.setattr(reclaim_action, "run_action", spying)
        answer = cycle_answer(snap)
    return answer, said


def _job_by_job(monkeypatch: pytest.MonkeyPatch, snap: Snapshot) -> str:
    with monkeypatch.context() as m:
        m.setattr(reclaim_action, "QUICK_SCREEN", False)
        return cycle_answer(snap)


def _queue(name: str, quota: float, index: int, parent: str | None, runtime: float | None = None) -> Queue:
    return Queue(
        name,
        parent=parent,
        created_index=index,
        resources={"gpu": QueueResource(quota, -1, 1)},
        reclaim_min_runtime_s=runtime,
    )


def _cluster(pick: Callable[[list[Any]], Any]) -> Snapshot:
    """2-3 departments of 1-3 leaves on 2-4 nodes of 4 GPUs, filled with running jobs of one or
    several pods (some elastic, some with sub-groups, some not preemptible), and pending jobs
    (one pod or a gang) mostly in one leaf."""
    n_nodes = pick([2, 3, 4])
    total = 4.0 * n_nodes
    depts = pick([2, 3])
    queues: list[Queue] = []
    leaves: list[str] = []
    # a contest: the first department deserves everything, the others a little less than they
    # hold (reclaim may take only their excess, often not enough for a big gang)
    contest = pick([False, True])
    for d in range(depts):
        if contest:
            quota = total if d == 0 else pick([total - 3.0, total - 1.0, total / 2, 1.0])
        else:
            quota = pick([total / depts, 0.0, total, total - 3.0])
        queues.append(_queue(f"d{d}", quota, len(queues), None))
        n_leaves = pick([1, 2, 3])
        for i in range(n_leaves):
            runtime = pick([None, None, None, 300.0, 900.0]) if not contest or d > 0 and i == 0 else None
            if contest:
                quota = total if d == 0 else pick([0.0, 1.0])
            else:
                quota = pick([total / depts / n_leaves, 0.0, 1.0, total, total - 3.0])
            queues.append(_queue(f"l{d}{i}", quota, len(queues), f"d{d}", runtime))
            leaves.append(f"l{d}{i}")
    # amounts that are not quarters (sums not exact), taints: the quick screen steps aside
    odd = not contest and pick([False, False, True])
    nodes = []
    for i in range(n_nodes):
        taints = [Taint("dedicated", "x")] if not contest and pick([False, False, False, True]) else []
        nodes.append(Node(f"n{i}", gpus=4, labels={"zone": f"z{i % 2}"}, taints=taints))
    jobs: list[Job] = []
    for n in nodes:
        free = 4.0
        while free > 1e-9:
            gpu = pick([0.25, 0.5, 1.0, 1.0, 0.33 if odd else 0.5])
            pods = pick([1, 1, 1, 2, 3])
            if gpu * pods > free + 1e-9:
                gpu, pods = min(free, 0.25), 1
            name = f"r{len(jobs):03d}"
            subgroups: list[SubGroup] = []
            if pods > 1 and pick([False, False, True]):
                subgroups = [SubGroup("a", 1), SubGroup("b", 0)]
            tasks = [
                Task(
                    f"{name}-{k}",
                    gpu=gpu,
                    state=TaskState.RUNNING,
                    node=n.name,
                    subgroup=(("a" if k == 0 else "b") if subgroups else None),
                )
                for k in range(pods)
            ]
            jobs.append(
                Job(
                    name,
                    queue=pick([x for x in leaves if not x.startswith("l0")] if contest else leaves),
                    priority=pick([50, 50, 50, 150]),
                    tasks=tasks,
                    min_available=pick([1, pods]),
                    subgroups=subgroups,
                    created_s=float(len(jobs)),
                    last_start_s=pick([None, 100.0, 1200.0]),
                )
            )
            free -= gpu * pods
    hot = leaves[0] if contest else pick(leaves)
    for j in range(pick([1, 2, 3, 5])):
        pods = pick([1, 1, 2, 4])
        gpu = pick([0.25, 0.5, 1.0, 2.0, 4.0])
        name = f"p{j:02d}"
        jobs.append(
            Job(
                name,
                queue=hot if pick([True, True, False]) else pick(leaves),
                priority=pick([50, 50, 150]),
                tasks=[Task(f"{name}-{k}", gpu=gpu) for k in range(pods)],
                min_available=pods,
                created_s=100.0 + j,
                node_selector=pick([{}, {}, {}, {"zone": "z0"}]),
                tolerations=[],
            )
        )
    return Snapshot(nodes, queues, jobs)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_random_clusters_give_the_job_by_job_answer(
    monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    snap = _cluster(lambda xs: data.draw(st.sampled_from(xs)))
    answer, _said = _verdicts(monkeypatch, snap)
    assert answer == _job_by_job(monkeypatch, snap)


def test_the_quick_screen_decides_and_steps_aside() -> None:
    """Over seeded clusters the quick screen gives each verdict and steps aside (the job-by-job
    test above would pass trivially if it never decided)."""
    import random

    said: Counter[str | None] = Counter()
    mp = pytest.MonkeyPatch()
    try:
        for seed in range(150):
            snap = _cluster(random.Random(seed).choice)
            answer, s = _verdicts(mp, snap)
            said.update(s)
            assert answer == _job_by_job(mp, snap), seed
    finally:
        mp.undo()
    assert said["no_scenario"] > 0 and said["no_victims"] > 0 and said[None] > 0, said


def test_bench_unplaceable_gang_is_proved_by_the_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's unplaceable gang (79 of the 80 GPUs it needs may be reclaimed)."""
    snap = workloads.reclaim_snapshot(20, victim_quota=20 * 8 - 79, gang_tasks=10)
    answer, said = _verdicts(monkeypatch, snap)
    assert said == Counter({"no_scenario": 1})
    assert answer == _job_by_job(monkeypatch, snap)
    result = json.loads(answer)
    assert all(t["status"] == "Pending" for name, t in result["tasks"].items() if name.startswith("gang-"))


@pytest.mark.parametrize("seed", range(60))
def test_leaf_sums_are_the_chunks_of_victim_chunks(seed: int) -> None:
    """Each leaf's sums against ``victim_order.victim_chunks`` of its victim jobs, also after some pods
    are evicted in a statement (the sums follow the leaf's allocation stamp) and rolled back."""
    import random

    from scheduler.actions.reclaim.victim_sums import leaf_victims
    from scheduler.cycle import open_session

    rng = random.Random(seed)
    snap = _cluster(rng.choice)
    session = open_session(snap, Config(actions=ACTIONS), "default")

    def check() -> None:
        for leaf, qs in session.queues.items():
            if not qs.is_leaf:
                continue
            jobs = [
                v
                for v in session.jobs_of_queue(leaf)
                if v.is_preemptible and victim_order.active_tasks(session, v)
            ]
            chunks = victim_order.victim_chunks(session, jobs, set())
            gpus = [sum(session.placements[t.name].charge["gpu"] for t in c.tasks) for c in chunks]
            sums = leaf_victims(session, leaf)
            if any(j.subgroups for j in jobs) or any(not float(g * 4).is_integer() for g in gpus):
                assert sums is None
                continue
            assert sums is not None
            assert (sums.jobs, sums.gpu, sums.biggest) == (len(jobs), sum(gpus), max(gpus, default=0.0))
            assert sums.first == (jobs[0].name if jobs else None)
            assert sums.started == any(j.last_start_s is not None for j in jobs)

    check()
    stmt = session.statement()
    running = [t for j in snap.jobs for t in j.tasks if t.state == TaskState.RUNNING]
    for t in rng.sample(running, min(3, len(running))):
        stmt.evict(t)
    check()
    stmt.rollback()
    check()


def _pinned_cluster(rng: Any) -> Snapshot:
    """Leaves of running pods on pinned whole GPUs (the load's fast path): some leaves only
    one-pod jobs (preemptible or not, started or not), others also a two-pod gang, a pod without
    named devices or a fraction; and pending one-pod jobs."""
    queues = [_queue("d0", 16.0, 0, None)]
    leaves = [f"l{i}" for i in range(4)]
    queues += [_queue(leaf, rng.choice([0.0, 4.0]), 1 + i, "d0") for i, leaf in enumerate(leaves)]
    nodes = [Node(f"n{i}", gpus=8) for i in range(3)]
    jobs: list[Job] = []
    for n in nodes:
        free = list(range(8))
        while free:
            leaf = rng.choice(leaves)
            gpus = min(len(free), rng.choice([1, 1, 2, 3]))
            kind = rng.choice(["one"] * 6 + ["gang", "unpinned", "fraction"]) if leaf != "l0" else "one"
            name = f"r{len(jobs):03d}"
            common = {"state": TaskState.RUNNING, "node": n.name}
            if kind == "gang" and len(free) >= 2:
                tasks = [Task(f"{name}-{k}", gpu=1, gpu_devices=(free[k],), **common) for k in range(2)]
                free = free[2:]
            elif kind == "unpinned":
                tasks = [Task(f"{name}-0", gpu=1, **common)]
                free = free[1:]
            elif kind == "fraction":
                tasks = [Task(f"{name}-0", gpu=0.5, gpu_devices=(free[0],), **common)]
                free = free[1:]
            else:
                tasks = [Task(f"{name}-0", gpu=gpus, gpu_devices=tuple(free[:gpus]), **common)]
                free = free[gpus:]
            jobs.append(
                Job(
                    name,
                    queue=leaf,
                    priority=rng.choice([50, 50, 150]),
                    tasks=tasks,
                    created_s=float(len(jobs)),
                    last_start_s=rng.choice([None, 100.0]),
                )
            )
    jobs += [Job(f"p{i}", queue=rng.choice(leaves), tasks=[Task(f"p{i}-0", gpu=2)]) for i in range(3)]
    return Snapshot(nodes, queues, jobs)


@pytest.mark.parametrize("seed", range(40))
def test_sums_kept_at_load_are_those_of_the_walk(seed: int) -> None:
    """A leaf of one-pod jobs on pinned whole GPUs has its sums kept as the session loads
    (``Session.loaded_victims``): they are the ones ``_leaf_victims`` finds walking its jobs; a
    leaf with any other loaded pod has none kept (``l0`` has only such jobs)."""
    import random

    from scheduler.actions.reclaim.victim_sums import _as_loaded, _leaf_victims
    from scheduler.cycle import open_session

    snap = _pinned_cluster(random.Random(seed))
    session = open_session(snap, Config(actions=ACTIONS), "default")
    for leaf, qs in session.queues.items():
        if not qs.is_leaf:
            continue
        loaded = session.loaded_victims.get(leaf)
        ordinary = all(
            len(j.tasks) == 1 and j.tasks[0].gpu_devices and j.tasks[0].gpu >= 1
            for j in session.jobs_of_queue(leaf)
            if j.tasks[0].node is not None
        )
        has_victim = any(j.is_preemptible and j.tasks[0].node for j in session.jobs_of_queue(leaf))
        assert (loaded is not None) == (ordinary and has_victim), leaf
        if loaded is not None:
            assert loaded[0] == session.queue_stamp.get(leaf, 0)
            assert _as_loaded(loaded[1]) == _leaf_victims(session, leaf)
