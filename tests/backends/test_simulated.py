"""The simulated backend (backends/simulated.py) over a cluster it is given, with no database: it moves
the cluster on to its clock, reads the pods only when looked at, and refuses binds the nodes no longer
take. The portal's own cluster (its rows, workloads/simulated_cluster.py) runs in tests/portal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kai_portal.cluster.backends import Bind, Evict, JobRef, ObservedNode, ObservedPod, TaskStatus
from kai_portal.cluster.backends.base import GpuRequest
from kai_portal.cluster.backends.simulated import SimulatedBackend, SimulatedCluster

START = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)


def _node(name: str, cordoned: bool = False) -> ObservedNode:
    return ObservedNode(name=name, pool="default", labels={}, unschedulable=cordoned, ready=True,
                        pressure_conditions=(), gpu_count=8, gpu_product="A100", gpu_memory_mib=40_000,
                        cpu_millis=96_000, memory_mib=512_000, max_pods=110)  # fmt: skip


def _pod(name: str) -> ObservedPod:
    return ObservedPod(namespace="ml", name=name, uid=name, node=None, phase="Pending",
                       status=TaskStatus.PENDING, queue="research", job=JobRef("ml", "PodGroup", name),
                       priority_class="train", preemptibility=None, gpu=GpuRequest(whole=1), cpu_millis=0,
                       memory_mib=0, created_at=START, deletion_timestamp=None, gpu_devices=(), labels={},
                       annotations={})  # fmt: skip


class TwoNodes:
    """A plain cluster of two nodes (one cordoned) and one pending pod, recording what was asked."""

    def __init__(self) -> None:
        self.times: list[datetime] = []
        self.pod_reads = 0
        self.state = {"gpu-1": _node("gpu-1"), "gpu-2": _node("gpu-2", cordoned=True)}

    def advance(self, now: datetime) -> None:
        self.times.append(now)

    def nodes(self) -> dict[str, ObservedNode]:
        return dict(self.state)

    def pods(self) -> dict[tuple[str, str], ObservedPod]:
        self.pod_reads += 1
        return {("ml", "p1"): _pod("p1")}

    def schedulable(self, names: set[str]) -> dict[str, bool]:
        return {n: not node.unschedulable for n, node in self.state.items() if n in names}


def test_observe_moves_the_cluster_to_the_clock_and_reads_pods_only_when_looked_at() -> None:
    cluster: SimulatedCluster = TwoNodes()
    now = [START]
    backend = SimulatedBackend(cluster, clock=lambda: now[0])

    state = backend.observe()
    now[0] += timedelta(seconds=5)
    backend.observe()

    assert isinstance(cluster, TwoNodes)
    assert cluster.times == [START, START + timedelta(seconds=5)]
    assert set(state.nodes) == {"gpu-1", "gpu-2"} and cluster.pod_reads == 0
    assert state.pods[("ml", "p1")].status == TaskStatus.PENDING and cluster.pod_reads == 1
    assert backend.capabilities.rows_are_the_cluster


def test_a_bind_to_a_cordoned_or_removed_node_is_refused_and_evictions_are_taken() -> None:
    backend = SimulatedBackend(TwoNodes(), clock=lambda: START)

    report = backend.apply(
        [Bind("ml", "p1", "gpu-1"), Bind("ml", "p2", "gpu-2"), Bind("ml", "p3", "gone")],
        [Evict("ml", "old", "Pod ml/old was reclaimed")],
        [],
    )

    assert [(r.operation, r.name, r.ok, r.error) for r in report.results] == [
        ("bind", "p1", True, None),
        ("bind", "p2", False, "node gpu-2 is cordoned"),
        ("bind", "p3", False, "node gone no longer exists"),
        ("evict", "old", True, None),
    ]
