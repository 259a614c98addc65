"""The simulated cluster backend: a cluster whose state lives on the portal's side of the seam.

The backend is plain Python; the simulated cluster it fronts is given at construction as a
``SimulatedCluster`` (in the portal, ``kai_portal/workloads/simulated_cluster.py``: the portal's
``Node`` and ``Pod`` rows, moved on by a clock). ``observe()`` moves the simulation on to
``clock()`` and returns the nodes and the live pods, the pods read only when first looked at.

``apply()`` checks each bind against the nodes as they are now (a node cordoned or removed since
the snapshot refuses the bind, as a kubelet would) and writes nothing: the loop persists the
accepted decisions itself, in the same transaction as the rest of the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Protocol

from .base import (
    ApplyReport,
    Bind,
    Capabilities,
    ClusterState,
    Evict,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
)


class SimulatedCluster(Protocol):
    """The state behind a ``SimulatedBackend`` and the steps that move it on."""

    def advance(self, now: datetime) -> None:
        """Move the cluster on to ``now``: start bound pods, finish and release pods."""
        ...

    def nodes(self) -> dict[str, ObservedNode]:
        """Every node, as the scheduler sees it."""
        ...

    def pods(self) -> dict[tuple[str, str], ObservedPod]:
        """Every live pod by (namespace, name)."""
        ...

    def schedulable(self, names: set[str]) -> dict[str, bool]:
        """Of the nodes named, those that exist, and whether each takes pods now."""
        ...


class _PodsOnDemand(dict[tuple[str, str], ObservedPod]):
    """A dict of observed pods that reads them the first time it is used."""

    def __init__(self, load: Callable[[], dict[tuple[str, str], ObservedPod]]) -> None:
        super().__init__()
        self._load: Callable[[], dict[tuple[str, str], ObservedPod]] | None = load

    def _filled(self) -> _PodsOnDemand:
        if self._load is not None:
            load, self._load = self._load, None
            self.update(load())
        return self

    def __getitem__(self, key: tuple[str, str]) -> ObservedPod:
        return super(_PodsOnDemand, self._filled()).__getitem__(key)

    def __contains__(self, key: object) -> bool:
        return super(_PodsOnDemand, self._filled()).__contains__(key)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return super(_PodsOnDemand, self._filled()).__iter__()

    def __len__(self) -> int:
        return super(_PodsOnDemand, self._filled()).__len__()

    def get(self, key: tuple[str, str], default: Any = None) -> Any:
        return super(_PodsOnDemand, self._filled()).get(key, default)

    def keys(self) -> Any:
        return super(_PodsOnDemand, self._filled()).keys()

    def values(self) -> Any:
        return super(_PodsOnDemand, self._filled()).values()

    def items(self) -> Any:
        return super(_PodsOnDemand, self._filled()).items()


class SimulatedBackend:
    """A ``ClusterBackend`` over a simulated cluster, moved on by a clock."""

    # The loop skips syncing observed state into rows: the rows are the state.
    capabilities = Capabilities(rows_are_the_cluster=True)

    def __init__(self, cluster: SimulatedCluster, clock: Callable[[], datetime]) -> None:
        self.cluster = cluster
        self.clock = clock

    # ----- observe -------------------------------------------------------

    def observe(self) -> ClusterState:
        """Move the simulation on to ``clock()`` and return the nodes and live pods.

        The pods are read when first looked at: the cycle never does (the rows are the cluster,
        ``rows_are_the_cluster``), and building every live pod took minutes at a 100,000-pod backlog."""
        self.cluster.advance(self.clock())
        return ClusterState(nodes=self.cluster.nodes(), pods=_PodsOnDemand(self.cluster.pods))

    # ----- apply ---------------------------------------------------------

    def apply(self, binds: list[Bind], evictions: list[Evict], events: list[PodEvent]) -> ApplyReport:
        """Accept each bind whose node still exists and takes pods; accept every eviction."""
        report = ApplyReport()
        usable = self.cluster.schedulable({b.node for b in binds})
        for bind in binds:
            if bind.node not in usable:
                report.add(_refused("bind", bind, f"node {bind.node} no longer exists"))
            elif not usable[bind.node]:
                report.add(_refused("bind", bind, f"node {bind.node} is cordoned"))
            else:
                report.add(OperationResult("bind", bind.namespace, bind.pod, ok=True))
        for eviction in evictions:
            report.add(OperationResult("evict", eviction.namespace, eviction.pod, ok=True))
        # Events are the Decision and JobMessage rows the loop writes; nothing more to record.
        return report

    # ----- submit / cancel -------------------------------------------------

    def submit(self, request: PodSpecRequest) -> ApplyReport:
        """Nothing to create: a portal job's pod rows are its simulated pods."""
        return ApplyReport([OperationResult("submit", request.namespace, request.job_name, ok=True)])

    def cancel(self, namespace: str, job: str, uid: str = "") -> ApplyReport:
        """Nothing to delete: the portal already marked the pods releasing."""
        return ApplyReport([OperationResult("cancel", namespace, job, ok=True)])


def _refused(operation: str, bind: Bind, error: str) -> OperationResult:
    return OperationResult(operation, bind.namespace, bind.pod, ok=False, error=error)
