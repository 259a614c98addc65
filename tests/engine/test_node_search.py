"""The fast paths of the engine against plain reference implementations (hypothesis).

``placement.best_fit`` (bucketed node index) must pick exactly the node, devices and fit-now
flag of ``best_fit_reference`` (check every node, sort by score desc / name asc, take the first)
while the cluster state changes under it; and a whole cycle run with every shortcut (node index,
fit-error cache, free-GPU cache, memoised queue order) must give the same result as one run with
all of them replaced by the straightforward versions."""

from __future__ import annotations

import dataclasses
import importlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler.bench.equivalence import random_snapshot
from scheduler.cycle import open_session
from scheduler.model import MatchExpression, PreferredTerm, Taint, Toleration
from scheduler.ordering import JobQueue
from scheduler.placement import best_fit, best_fit_reference
from scheduler.state import Placement

allocate_mod = importlib.import_module("scheduler.actions.allocate")
free_gpus_mod = importlib.import_module("scheduler.actions.common.free_gpus")
gain_mod = importlib.import_module("scheduler.actions.reclaim.gain")
simulation_mod = importlib.import_module("scheduler.actions.solvers.simulation")
consolidation_mod = importlib.import_module("scheduler.actions.consolidation")
cycle_mod = importlib.import_module("scheduler.cycle")
ordering_mod = importlib.import_module("scheduler.ordering")

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, int]:
    n = draw(st.integers(1, 12))
    nodes = [
        Node(
            f"n{i:02d}",
            gpus=draw(st.sampled_from([0, 1, 2, 4, 8])),
            gpu_memory_mib=draw(st.sampled_from([40960, 81920])),
            cpu_millis=draw(st.sampled_from([4000, 16000, 1_000_000])),
            unschedulable=draw(st.integers(0, 9)) == 0,
            max_pods=draw(st.sampled_from([2, 5, 110])),
            labels={"zone": f"z{i % 2}", "rack": f"r{i % 3}"},
            taints=draw(
                st.sampled_from([[], [], [], [Taint("gpu", "yes")], [Taint("spot", "", "PreferNoSchedule")]])
            ),
        )
        for i in range(n)
    ]
    # Running and releasing one-GPU pods scattered over the nodes.
    jobs = []
    for i, node in enumerate(nodes):
        for g in range(draw(st.integers(0, node.gpus))):
            state = draw(st.sampled_from([TaskState.RUNNING, TaskState.RUNNING, TaskState.RELEASING]))
            cpu = draw(st.sampled_from([0, 1000, 3000]))
            task = Task(f"r{i}-{g}", gpu=1, cpu_millis=cpu, state=state, node=node.name)
            jobs.append(Job(f"r{i}-{g}", "q", tasks=[task]))
    queues = [Queue("q", resources={"gpu": QueueResource(-1, -1, 1)})]
    return Snapshot(nodes, queues, jobs), draw(st.integers(0, 2**31))


@SETTINGS
@given(clusters())
def test_best_fit_matches_reference(case: tuple[Snapshot, int]) -> None:
    snap, seed = case
    rnd = random.Random(seed)
    session = open_session(snap, Config(), "default")
    nodes = list(session.nodes.values())
    stmt = session.statement()
    # Every task kind the index serves: whole GPUs, fractions, GPU memory, CPU only.
    job = Job("p", "q", tasks=[Task(f"p{k}", gpu=rnd.choice([1, 1, 2, 3, 4, 8])) for k in range(40)])
    session.jobs[job.name] = job
    for k, task in enumerate(job.tasks):
        kind = rnd.random()
        if kind < 0.2:
            task.gpu = rnd.choice([0.25, 0.5, 0.75, 0.3])
        elif kind < 0.3:
            task.gpu, task.gpu_memory_mib = 0, rnd.choice([10240, 40960, 81920])
        elif kind < 0.45:
            task.gpu = 0
            task.memory_mib = rnd.choice([0, 1024, 10**9])
        task.cpu_millis = rnd.choice([0, 0, 1000, 5000, 15000])
        session.task_job[task.name] = job
        selector = {"zone": "z1"} if rnd.random() < 0.2 else {}
        want = best_fit_reference(session, task, selector, nodes)
        got = best_fit(session, task, selector, nodes)
        if want is None:
            assert got is None
        else:
            assert got is not None
            assert (got[0].name, got[1].devices, got[1].now) == (want[0].name, want[1].devices, want[1].now)
            stmt.place(task, want[0].name, want[1].devices, pipelined=not want[1].now)
        if rnd.random() < 0.15:  # undo a few placements: the index must follow rollbacks too
            stmt.rollback(max(0, stmt.checkpoint() - rnd.randint(1, 3)))
        if k % 7 == 6:
            stmt.commit()


@SETTINGS
@given(clusters())
def test_best_fit_with_placement_rules_matches_reference(case: tuple[Snapshot, int]) -> None:
    """Jobs with placement rules: required rules stay on the indexed path (filters), preferences
    take the reference path; both must agree with the reference as the job's pods are placed."""
    snap, seed = case
    rnd = random.Random(seed)
    session = open_session(snap, Config(), "default")
    nodes = list(session.nodes.values())
    stmt = session.statement()
    for j in range(4):
        job = Job(
            f"p{j}",
            "q",
            tasks=[
                Task(
                    f"p{j}-{k}",
                    gpu=rnd.choice([1, 1, 2, 4, 0.5, 0.25, 0]),
                    gpu_memory_mib=rnd.choice([0, 0, 20480]),
                    cpu_millis=rnd.choice([0, 1000, 5000]),
                )
                for k in range(10)
            ],
            tolerations=[Toleration("gpu", "Exists")] if rnd.random() < 0.5 else [],
            node_affinity=([(MatchExpression("zone", "NotIn", ("z0",)),)] if rnd.random() < 0.3 else []),
            preferred_node_affinity=(
                [PreferredTerm(5, (MatchExpression("rack", "In", ("r1",)),))] if rnd.random() < 0.3 else []
            ),
            anti_affinity_key=rnd.choice([None, "kubernetes.io/hostname", "rack"]),
            affinity_key="zone" if rnd.random() < 0.3 else None,
            affinity_weight=3,
        )
        session.jobs[job.name] = job
        for task in job.tasks:
            session.task_job[task.name] = job
            session.placements[task.name] = session.placements.get(task.name) or _pending()
            want = best_fit_reference(session, task, job, nodes)
            got = best_fit(session, task, job, nodes)
            if want is None:
                assert got is None
                continue
            assert got is not None
            assert (got[0].name, got[1].devices, got[1].now) == (want[0].name, want[1].devices, want[1].now)
            stmt.place(task, want[0].name, want[1].devices, pipelined=not want[1].now)
        stmt.commit()


def _pending() -> Placement:
    return Placement(TaskState.PENDING)


class _NoCache(dict):  # type: ignore[type-arg]
    def __setitem__(self, key: object, value: object) -> None:
        pass


class _ReferenceJobQueue(JobQueue):
    def pop(self):  # type: ignore[no-untyped-def]
        self.keys.clear()
        self.requests.clear()
        return super().pop()


def _reference_open_session(*args, **kwargs):  # type: ignore[no-untyped-def]
    session = open_session(*args, **kwargs)
    session.fit_error_cache = _NoCache()
    return session


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def enable() -> None:
        monkeypatch.setattr(allocate_mod, "best_fit", best_fit_reference)
        monkeypatch.setattr(simulation_mod, "best_fit", best_fit_reference)
        monkeypatch.setattr(gain_mod, "free_gpus", free_gpus_mod.free_gpus_scan)
        monkeypatch.setattr(consolidation_mod, "allocatable_gpus", consolidation_mod.allocatable_gpus_scan)
        monkeypatch.setattr(allocate_mod, "JobQueue", _ReferenceJobQueue)
        monkeypatch.setattr(ordering_mod, "JobQueue", _ReferenceJobQueue)
        monkeypatch.setattr(cycle_mod, "open_session", _reference_open_session)

    return enable


def _with_rules(snap: Snapshot, seed: int) -> Snapshot:
    """The snapshot with placement rules: some nodes tainted, some jobs tolerating the taint,
    with node affinity, anti-affinity or affinity to their own pods."""
    rnd = random.Random(seed)
    nodes = [
        dataclasses.replace(
            n, taints=rnd.choice([[], [], [Taint("gpu", "yes")], [Taint("spot", "", "PreferNoSchedule")]])
        )
        for n in snap.nodes
    ]
    jobs = [
        dataclasses.replace(
            j,
            tolerations=[Toleration("gpu", "Exists")] if rnd.random() < 0.5 else [],
            node_affinity=[(MatchExpression("rack", "NotIn", ("r0",)),)] if rnd.random() < 0.1 else [],
            preferred_node_affinity=(
                [PreferredTerm(7, (MatchExpression("zone", "In", ("z1",)),))] if rnd.random() < 0.2 else []
            ),
            anti_affinity_key="kubernetes.io/hostname" if rnd.random() < 0.2 else None,
            affinity_key="rack" if rnd.random() < 0.2 else None,
            affinity_weight=2,
        )
        for j in snap.jobs
    ]
    return Snapshot(nodes, snap.queues, jobs)


@pytest.mark.parametrize("seed", range(60))
def test_cycle_matches_reference_engine(seed: int, reference) -> None:  # type: ignore[no-untyped-def]
    snap = random_snapshot(seed)
    if seed % 2:
        snap = _with_rules(snap, seed)
    cfg = Config(placement="spread") if seed % 5 == 4 else Config()
    fast = run_cycle(snap, cfg).to_json()
    reference()
    slow = run_cycle(snap, cfg).to_json()
    assert fast == slow
