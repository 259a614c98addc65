"""Invariants of one allocate cycle on random snapshots (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle

EPS = 1e-6
GPU_SIZES = st.sampled_from([0.25, 0.5, 1, 1, 2, 4])


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    nodes = [
        Node(
            f"n{i}",
            gpus=draw(st.integers(0, 4)),
            gpu_memory_mib=1000,
            cpu_millis=draw(st.sampled_from([4000, 64000])),
            unschedulable=draw(st.booleans()) and i > 0,
            max_pods=draw(st.integers(1, 8)),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    queues = [Queue("root", resources={"gpu": QueueResource(-1, draw(st.sampled_from([-1, 6])), 1)})]
    for i in range(draw(st.integers(1, 3))):
        queues.append(
            Queue(
                f"q{i}",
                parent="root",
                created_index=i + 1,
                priority=draw(st.sampled_from([50, 100])),
                resources={
                    "gpu": QueueResource(
                        draw(st.sampled_from([0, 1, 2, -1])),
                        draw(st.sampled_from([-1, 1, 3])),
                        draw(st.sampled_from([0, 1, 2])),
                    )
                },
            )
        )
    jobs = []
    for j in range(draw(st.integers(0, 8))):
        n = draw(st.integers(1, 4))
        gpu = draw(GPU_SIZES)
        tasks = [
            Task(f"j{j}-{t}", gpu=gpu, cpu_millis=draw(st.sampled_from([0, 1000, 3000]))) for t in range(n)
        ]
        jobs.append(
            Job(
                f"j{j}",
                queue=f"q{draw(st.integers(0, len(queues) - 2))}",
                tasks=tasks,
                min_available=draw(st.integers(0, n)),
                priority=draw(st.sampled_from([50, 125])),
                created_s=draw(st.integers(0, 100)),
            )
        )
    return Snapshot(nodes, queues, jobs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_cycle_invariants(snap: Snapshot) -> None:
    result = run_cycle(snap, Config(actions=("allocate",)))
    nodes = {n.name: n for n in snap.nodes}
    by_task = {t.key: t for j in snap.jobs for t in j.tasks}
    device_use: dict[tuple[str, int], float] = {}
    whole: set[tuple[str, int]] = set()
    pods: dict[str, int] = {}
    cpu: dict[str, float] = {}
    for out in result.tasks.values():
        if out.status not in (TaskState.ALLOCATED, TaskState.PIPELINED, TaskState.RUNNING):
            continue
        assert out.node is not None
        node = nodes[out.node]
        assert not node.unschedulable
        task = by_task[out.key]
        pods[out.node] = pods.get(out.node, 0) + 1
        cpu[out.node] = cpu.get(out.node, 0) + task.cpu_millis
        assert len(out.gpu_devices) == (task.whole_gpus or (1 if task.is_fractional else 0))
        for d in out.gpu_devices:
            key = (out.node, d)
            assert d < node.gpus
            if task.is_fractional:
                device_use[key] = device_use.get(key, 0) + task.gpu
                assert key not in whole
            else:
                assert key not in whole and key not in device_use, "device used twice"
                whole.add(key)
    assert all(v <= 1 + EPS for v in device_use.values()), "device over-committed"
    for name, n in pods.items():
        assert n <= nodes[name].max_pods
        assert cpu[name] <= nodes[name].cpu_millis + EPS

    for q in snap.queues:
        lim = q.res("gpu").limit
        if lim >= 0:
            assert result.queues[q.name].allocated["gpu"] <= lim + EPS, "queue over its limit"

    for job in snap.jobs:
        placed = sum(1 for t in job.tasks if result.tasks[t.name].status != TaskState.PENDING)
        assert placed == 0 or placed >= job.gang_min, "gang split"

    # KAI quirk (kai-semantics §2.4.1): when deserved quotas alone over-subscribe a level, phase 1
    # hands them out anyway and the level sums to more than its total. Otherwise nothing is over-shared.
    def quota_claims(queues: list[Queue]) -> float:
        total = 0.0
        for q in queues:
            res = q.res("gpu")
            req = result.queues[q.name].requested["gpu"]
            requestable = req if res.limit < 0 else min(res.limit, req)
            total += requestable if res.quota < 0 else min(res.quota, requestable)
        return total

    capacity = sum(n.gpus for n in snap.nodes if not n.unschedulable)
    top = [q for q in snap.queues if q.parent is None]
    if quota_claims(top) <= capacity:
        assert sum(result.queues[q.name].fair_share["gpu"] for q in top) <= capacity + EPS
    kids = [q for q in snap.queues if q.parent == "root"]
    root_fs = result.queues["root"].fair_share["gpu"]
    if quota_claims(kids) <= root_fs:
        assert sum(result.queues[q.name].fair_share["gpu"] for q in kids) <= root_fs + EPS
