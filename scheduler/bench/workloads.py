"""Benchmark workloads in the shapes of KAI Scheduler's own engine benchmarks.

Common shape: nodes of 8 GPUs; 2 departments with 2 leaf queues each, each
leaf deserving a quarter of the GPUs (weight 1); job ``i`` goes to leaf
``i mod 4``; training priority (50, preemptible); one-GPU one-task jobs unless
said otherwise. Each builder returns a :class:`Workload` whose ``check``
judges a cycle's result (the benchmark's correctness column).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler import overcommit
from scheduler.model import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState
from scheduler.result import CycleResult

GPUS_PER_NODE = 8
TRAIN = 50
ALLOCATE_ONLY = Config(actions=("allocate",))
ALL_ACTIONS = Config()


@dataclass
class Check:
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail}


@dataclass
class Workload:
    """A named cluster state, the cycle configuration to time, and the expected answer."""

    group: str
    name: str
    build: Callable[[], Snapshot]
    config: Config
    check: Callable[[Snapshot, CycleResult], Check]
    size: dict[str, int] = field(default_factory=dict)
    quick: bool = False
    reps: int = 10
    timeout_s: float = 120.0


# ---- building blocks --------------------------------------------------------


def nodes(n: int, gpus: int = GPUS_PER_NODE) -> list[Node]:
    return [Node(f"node-{i:05d}", gpus=gpus) for i in range(n)]


def q(name: str, quota: float, parent: str | None = None, index: int = 0, weight: float = 1.0) -> Queue:
    return Queue(
        name, parent=parent, created_index=index, resources={"gpu": QueueResource(quota, -1, weight)}
    )


def kai_queues(total_gpus: float) -> list[Queue]:
    """2 departments x 2 leaves, each leaf deserving a quarter of the GPUs."""
    out = [q("dept-0", total_gpus / 2, index=0), q("dept-1", total_gpus / 2, index=1)]
    for i in range(4):
        out.append(q(f"queue-{i}", total_gpus / 4, parent=f"dept-{i // 2}", index=2 + i))
    return out


def tree_queues(total_gpus: float, departments: int, leaves_per_dept: int) -> list[Queue]:
    out = [q(f"dept-{d}", total_gpus / departments, index=d) for d in range(departments)]
    leaves = departments * leaves_per_dept
    for i in range(leaves):
        out.append(
            q(f"queue-{i}", total_gpus / leaves, parent=f"dept-{i // leaves_per_dept}", index=departments + i)
        )
    return out


def job(
    name: str,
    queue: str,
    tasks: int = 1,
    gpu: float = 1.0,
    running_on: str | None = None,
    device: int | None = None,
    priority: int = TRAIN,
    last_start_s: float | None = None,
) -> Job:
    ts = []
    for k in range(tasks):
        if running_on is None:
            ts.append(Task(f"{name}-{k}", job=name, gpu=gpu))
        else:
            devs = tuple(range(device, device + int(gpu))) if device is not None else ()
            ts.append(
                Task(
                    f"{name}-{k}",
                    job=name,
                    gpu=gpu,
                    state=TaskState.RUNNING,
                    node=running_on,
                    gpu_devices=devs,
                )
            )
    start = last_start_s if running_on is not None else None
    return Job(name, queue=queue, priority=priority, tasks=ts, last_start_s=start)


def leaf_of(i: int, leaves: int = 4) -> str:
    return f"queue-{i % leaves}"


# ---- checks -----------------------------------------------------------------


def victims(result: CycleResult) -> list[Any]:
    """Evicted tasks that are not simply moved elsewhere (consolidation re-placements)."""
    return [e for e in result.evictions if getattr(e, "moved_to", None) is None]


def _overcommit(snapshot: Snapshot, result: CycleResult) -> str | None:
    """The first over-commit of the cycle: a GPU device held twice (Running, Allocated, Pipelined
    and Releasing tasks all counted, see ``scheduler.overcommit``), a node's CPU, memory or pod
    slots, or a queue limit."""
    found = overcommit.problems(snapshot, result)
    return found[0] if found else None


def all_allocated(
    expect_allocated: int, expect_evicted: int | None = 0
) -> Callable[[Snapshot, CycleResult], Check]:
    """Exactly this many pending tasks allocated, no device over-committed, no gang started partly,
    and (unless ``expect_evicted`` is None) exactly this many evictions."""

    def check(snapshot: Snapshot, result: CycleResult) -> Check:
        pending = [t for j in snapshot.jobs for t in j.tasks if t.state == TaskState.PENDING]
        statuses = Counter(result.tasks[t.key].status for t in pending if t.key in result.tasks)
        allocated = statuses.get(TaskState.ALLOCATED, 0)
        problems = []
        if allocated != expect_allocated:
            problems.append(f"allocated {allocated}, expected {expect_allocated}")
        evicted = len(victims(result))
        if expect_evicted is not None and evicted != expect_evicted:
            problems.append(f"evicted {evicted}, expected {expect_evicted}")
        over = _overcommit(snapshot, result)
        if over:
            problems.append(over)
        # no gang may start partly
        for j in snapshot.jobs:
            st = [result.tasks[t.key].status for t in j.tasks if t.key in result.tasks]
            n_alloc = sum(1 for s in st if s == TaskState.ALLOCATED)
            if 0 < n_alloc < j.gang_min:
                problems.append(f"gang {j.name} started partly ({n_alloc}/{j.gang_min})")
                break
        if problems:
            return Check(False, "; ".join(problems))
        return Check(True, f"{allocated} allocated, {evicted} evicted")

    return check


def gang_reclaim(
    gang_job: str, n_victims: int, victim_queue: str
) -> Callable[[Snapshot, CycleResult], Check]:
    """The gang is placed (pipelined onto the victims' GPUs) and exactly ``n_victims`` tasks are evicted."""

    def check(snapshot: Snapshot, result: CycleResult) -> Check:
        gang = next(j for j in snapshot.jobs if j.name == gang_job)
        st = Counter(result.tasks[t.key].status for t in gang.tasks)
        placed = st.get(TaskState.PIPELINED, 0) + st.get(TaskState.ALLOCATED, 0)
        ev = victims(result)
        wrong_queue = [e.job for e in ev if not e.job.startswith(victim_queue)]
        problems = []
        if placed != len(gang.tasks):
            problems.append(f"gang placed {placed}/{len(gang.tasks)} tasks")
        if len(ev) != n_victims:
            problems.append(f"{len(ev)} victims, expected {n_victims}")
        if wrong_queue:
            problems.append(f"victim {wrong_queue[0]} outside {victim_queue}")
        if problems:
            return Check(False, "; ".join(problems))
        return Check(True, f"gang placed ({dict((k.value, v) for k, v in st.items())}), {len(ev)} victims")

    return check


def gang_unplaceable(gang_job: str) -> Callable[[Snapshot, CycleResult], Check]:
    def check(snapshot: Snapshot, result: CycleResult) -> Check:
        gang = next(j for j in snapshot.jobs if j.name == gang_job)
        st = Counter(result.tasks[t.key].status for t in gang.tasks)
        ev = victims(result)
        problems = []
        if st.get(TaskState.PENDING, 0) != len(gang.tasks):
            problems.append(f"gang not pending: {dict((k.value, v) for k, v in st.items())}")
        if ev:
            problems.append(f"{len(ev)} tasks evicted for a gang that cannot be placed")
        if problems:
            return Check(False, "; ".join(problems))
        return Check(True, "gang pending, 0 victims")

    return check


# ---- the workloads ----------------------------------------------------------


def allocate_snapshot(n_nodes: int, n_jobs: int) -> Snapshot:
    total = n_nodes * GPUS_PER_NODE
    jobs = [job(f"job-{i:05d}", leaf_of(i)) for i in range(n_jobs)]
    return Snapshot(nodes(n_nodes), kai_queues(total), jobs)


def full_cycle_snapshot(n_nodes: int, n_jobs: int) -> Snapshot:
    """Even-numbered jobs run on node ``i mod N``, odd ones are pending."""
    total = n_nodes * GPUS_PER_NODE
    ns = nodes(n_nodes)
    per_node: Counter[int] = Counter()
    jobs = []
    for i in range(n_jobs):
        if i % 2 == 0:
            k = i % n_nodes
            jobs.append(
                job(f"job-{i:05d}", leaf_of(i), running_on=ns[k].name, device=per_node[k], last_start_s=3600)
            )
            per_node[k] += 1
        else:
            jobs.append(job(f"job-{i:05d}", leaf_of(i)))
    return Snapshot(ns, kai_queues(total), jobs)


def many_queues_snapshot(n_nodes: int = 50, n_jobs: int = 200) -> Snapshot:
    total = n_nodes * GPUS_PER_NODE
    jobs = [job(f"job-{i:05d}", leaf_of(i, 20)) for i in range(n_jobs)]
    return Snapshot(nodes(n_nodes), tree_queues(total, 5, 4), jobs)


def gangs_snapshot(n_nodes: int = 50, n_jobs: int = 100, tasks: int = 4) -> Snapshot:
    total = n_nodes * GPUS_PER_NODE
    jobs = [job(f"job-{i:05d}", leaf_of(i), tasks=tasks) for i in range(n_jobs)]
    return Snapshot(nodes(n_nodes), kai_queues(total), jobs)


def reclaim_snapshot(n_nodes: int, victim_quota: float = 0, gang_tasks: int | None = None) -> Snapshot:
    """N full nodes of one-GPU jobs of a queue deserving ``victim_quota`` (0); a gang of 8-GPU tasks
    (N/2 of them unless ``gang_tasks``) from a queue deserving 8N.

    With ``victim_quota = 8N - 79`` only 79 GPUs of the victim queue are above its quota, so a
    gang of 10 x 8 GPUs can reclaim 79 of the 80 GPUs it needs: it cannot be placed."""
    total = n_nodes * GPUS_PER_NODE
    queues = [
        q("dept-victim", victim_quota, index=0),
        q("dept-reclaimer", total, index=1),
        q("victim", victim_quota, parent="dept-victim", index=2),
        q("reclaimer", total, parent="dept-reclaimer", index=3),
    ]
    ns = nodes(n_nodes)
    jobs = [
        job(f"victim-{k:06d}", "victim", running_on=ns[k // 8].name, device=k % 8, last_start_s=3600)
        for k in range(total)
    ]
    n_tasks = gang_tasks if gang_tasks is not None else max(1, n_nodes // 2)
    jobs.append(job("gang", "reclaimer", tasks=n_tasks, gpu=8))
    return Snapshot(ns, queues, jobs)


def stress_snapshot(n_nodes: int = 5000, running: int = 38_000, pending: int = 10_000) -> Snapshot:
    """5000 x 8 GPUs, ``running`` one-GPU tasks running, ``pending`` waiting, 100 queues in 3 levels
    (4 departments, 12 sub-departments, 84 leaves)."""
    total = n_nodes * GPUS_PER_NODE
    queues = [q(f"dept-{d}", total / 4, index=d) for d in range(4)]
    for s in range(12):
        queues.append(q(f"sub-{s}", total / 12, parent=f"dept-{s // 3}", index=4 + s))
    for i in range(84):
        queues.append(q(f"queue-{i}", total / 84, parent=f"sub-{i // 7}", index=16 + i))
    ns = nodes(n_nodes)
    jobs = [
        job(f"run-{k:06d}", leaf_of(k, 84), running_on=ns[k // 8].name, device=k % 8, last_start_s=3600)
        for k in range(running)
    ]
    jobs += [job(f"job-{i:06d}", leaf_of(i, 84)) for i in range(pending)]
    return Snapshot(ns, queues, jobs)


def stress_mixed_snapshot(n_nodes: int = 5000, running: int = 38_000, pending: int = 10_000) -> Snapshot:
    """The stress size with mixed pending tasks: of every 10, one half-GPU, one quarter-GPU, one
    20 GiB GPU-memory request, one CPU-only (4 cores, 16 GiB) and six whole GPUs."""
    snap = stress_snapshot(n_nodes, running, 0)
    jobs = list(snap.jobs)
    for i in range(pending):
        name, queue, kind = f"job-{i:06d}", leaf_of(i, 84), i % 10
        if kind == 0:
            task = Task(f"{name}-0", job=name, gpu=0.5)
        elif kind == 1:
            task = Task(f"{name}-0", job=name, gpu=0.25)
        elif kind == 2:
            task = Task(f"{name}-0", job=name, gpu_memory_mib=20480)
        elif kind == 3:
            task = Task(f"{name}-0", job=name, cpu_millis=4000, memory_mib=16384)
        else:
            task = Task(f"{name}-0", job=name, gpu=1.0)
        jobs.append(Job(name, queue=queue, priority=TRAIN, tasks=[task]))
    return Snapshot(snap.nodes, snap.queues, jobs)


PLACED = (TaskState.ALLOCATED, TaskState.PIPELINED)


def mixed_check(snapshot: Snapshot, result: CycleResult) -> Check:
    """No over-commit and every CPU-only task placed (CPU is plentiful). Evictions are reported,
    not refused: reclaim between sibling leaves is right here, and how far reclaim gets depends on
    its time budget (the detail says when it ran out)."""
    pending = [t for j in snapshot.jobs for t in j.tasks if t.state == TaskState.PENDING]
    placed = Counter(
        ("cpu" if not t.needs_gpu else "fraction" if t.is_fractional else "whole")
        for t in pending
        # placed: allocated, or pipelined (a task allocated this cycle that reclaim moved elsewhere)
        if t.key in result.tasks and result.tasks[t.key].status in PLACED
    )
    cpu_only = sum(1 for t in pending if not t.needs_gpu)
    problems = []
    over = _overcommit(snapshot, result)
    if over:
        problems.append(over)
    if placed["cpu"] != cpu_only:
        problems.append(f"CPU-only placed {placed['cpu']} of {cpu_only}")
    detail = (
        f"placed {placed['whole']} whole, {placed['fraction']} fractional, {placed['cpu']} CPU-only;"
        f" {result.counters.get('evicted', 0)} evicted, {result.counters.get('moved', 0)} moved"
    )
    if result.counters.get("actions_out_of_time"):
        detail += "; an eviction action stopped at its time budget"
    return Check(not problems, "; ".join(problems) or detail)


def size_of(snapshot: Snapshot) -> dict[str, int]:
    tasks = [t for j in snapshot.jobs for t in j.tasks]
    return {
        "nodes": len(snapshot.nodes),
        "gpus": sum(n.gpus for n in snapshot.nodes),
        "queues": len(snapshot.queues),
        "jobs": len(snapshot.jobs),
        "running_tasks": sum(1 for t in tasks if t.state == TaskState.RUNNING),
        "pending_tasks": sum(1 for t in tasks if t.state == TaskState.PENDING),
    }


SIZES = ((10, 50), (50, 200), (100, 500), (1000, 5000))
RECLAIM_SIZES = (10, 100, 500, 1000)


def _bind(fn: Callable[..., Snapshot], *args: Any, **kwargs: Any) -> Callable[[], Snapshot]:
    def build() -> Snapshot:
        return fn(*args, **kwargs)

    return build


# Over 80 lines: the benchmark's table of workloads, one entry each, read top to bottom.
def all_workloads() -> list[Workload]:
    out: list[Workload] = []
    for n, j in SIZES:
        out.append(
            Workload(
                "allocate",
                f"allocate-{n}n-{j}j",
                _bind(allocate_snapshot, n, j),
                ALLOCATE_ONLY,
                all_allocated(j),
                quick=n <= 50,
                reps=10 if n <= 100 else 3,
                timeout_s=240 if n >= 1000 else 120,
            )
        )
    for n, j in SIZES:
        out.append(
            Workload(
                "full-cycle",
                f"full-cycle-{n}n-{j}j",
                _bind(full_cycle_snapshot, n, j),
                ALL_ACTIONS,
                all_allocated(j // 2),
                quick=n <= 50,
                reps=10 if n <= 100 else 3,
                timeout_s=240 if n >= 1000 else 120,
            )
        )
    out.append(
        Workload(
            "queues-gangs",
            "20-queues-5-depts-50n-200j",
            many_queues_snapshot,
            ALL_ACTIONS,
            all_allocated(200),
            quick=True,
        )
    )
    out.append(
        Workload(
            "queues-gangs",
            "gangs-100x4-50n",
            gangs_snapshot,
            ALL_ACTIONS,
            all_allocated(400),
            quick=True,
        )
    )
    for n in RECLAIM_SIZES:
        out.append(
            Workload(
                "reclaim",
                f"reclaim-gang-{n}n",
                _bind(reclaim_snapshot, n),
                ALL_ACTIONS,
                gang_reclaim("gang", 4 * n, "victim"),
                quick=n <= 10,
                reps=10 if n <= 100 else 3,
                timeout_s=60 if n <= 100 else 150,
            )
        )
    for n in RECLAIM_SIZES:
        out.append(
            Workload(
                "unplaceable",
                f"unplaceable-gang-{n}n",
                _bind(reclaim_snapshot, n, victim_quota=n * GPUS_PER_NODE - 79, gang_tasks=10),
                ALL_ACTIONS,
                gang_unplaceable("gang"),
                quick=n <= 10,
                reps=10 if n <= 100 else 3,
                timeout_s=60 if n <= 100 else 150,
            )
        )
    out.append(
        Workload(
            "stress",
            "stress-5000n-38k-running-10k-pending",
            stress_snapshot,
            ALL_ACTIONS,
            # queues are within a task of their fair share, so a few reclaims are allowed
            all_allocated(5000 * GPUS_PER_NODE - 38_000, expect_evicted=None),
            reps=1,
            timeout_s=240,
        )
    )
    out.append(
        Workload(
            "stress",
            "stress-mixed-5000n-30pct-fractional-10pct-cpu",
            stress_mixed_snapshot,
            ALL_ACTIONS,
            mixed_check,
            reps=1,
            timeout_s=240,
        )
    )
    return out
