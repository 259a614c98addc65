"""The simulated cluster: the database rows are the cluster.

Nodes are ``cluster.Node`` rows (from the admin, a cluster file or seed_demo)
and pods are ``workloads.Pod`` rows. Time moves on each ``observe()``, at the
backend's clock:

* a pod bound by the previous cycle starts running;
* a running pod succeeds once ``started_at + job.duration <= now`` (no
  duration: it runs until cancelled or evicted) and frees its GPUs;
* a releasing pod (evicted, cancelled) lets go of its node
  ``SIMULATED_EVICTION_GRACE_SECONDS`` after the eviction, then goes back to
  pending or fails, per its job's restart policy (``lifecycle.release_pod``).

``apply()`` checks each bind against the nodes as they are now (a node
cordoned or removed since the snapshot refuses the bind, as a kubelet would)
and writes nothing: the loop persists the accepted decisions itself, in the
same transaction as the rest of the cycle. Cordoning and removing nodes are
``cluster/operations.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from kai_portal.workloads import lifecycle
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Pod

from .base import (
    ApplyReport,
    Bind,
    ClusterState,
    Evict,
    GpuRequest,
    JobRef,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
    TaskStatus,
)

_STATUS = {
    PodState.PENDING: TaskStatus.PENDING,
    PodState.BOUND: TaskStatus.BOUND,
    PodState.RUNNING: TaskStatus.RUNNING,
    PodState.RELEASING: TaskStatus.RELEASING,
    PodState.SUCCEEDED: TaskStatus.SUCCEEDED,
    PodState.FAILED: TaskStatus.FAILED,
}


def eviction_grace() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "SIMULATED_EVICTION_GRACE_SECONDS", 5)))


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
    """A ``ClusterBackend`` whose cluster is the portal's own rows, moved on by a clock."""

    # The loop skips syncing observed state into rows: the rows are the state.
    writes_rows = True

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or timezone.now

    # ----- observe -------------------------------------------------------

    def observe(self) -> ClusterState:
        """Move the simulation on to ``clock()`` and return the nodes and live pods.

        The pods are read when first looked at: the cycle never does (the rows are the cluster,
        ``writes_rows``), and building every live pod took minutes at a 100,000-pod backlog."""
        now = self.clock()
        with transaction.atomic():
            self.advance(now)
        return self._state()

    def advance(self, now: datetime) -> None:
        """Start bound pods, finish pods whose duration is over, release evicted pods after the grace."""
        moving = [PodState.BOUND, PodState.RUNNING, PodState.RELEASING]
        lifecycle.lock_jobs(Pod.objects.filter(state__in=moving).values_list("job_id", flat=True))
        bound = Pod.objects.filter(state=PodState.BOUND, node__isnull=False)
        touched = set(bound.values_list("job_id", flat=True))
        lifecycle.start_pods(bound.values_list("pk", flat=True), now)

        done, unhandled = [], {}
        for pod in Pod.objects.filter(state=PodState.RUNNING, job__duration__isnull=False).select_related(
            "job"
        ):
            started = pod.started_at or now
            try:
                over = started + pod.job.duration <= now  # type: ignore[operator]
            except OverflowError:
                # A row written past the submission bounds: fail that job, not the cycle.
                unhandled[pod.job_id] = pod.job
                continue
            if over:
                done.append(pod.pk)
                touched.add(pod.job_id)
        lifecycle.succeed_pods(done, now)
        for job in unhandled.values():
            problem = f"its duration ({job.duration}) is out of range"
            lifecycle.fail_job(job, lifecycle.unhandled_message(problem), now)

        grace = eviction_grace()
        for pod in Pod.objects.filter(state=PodState.RELEASING).select_related("job"):
            since = pod.releasing_since or pod.reason_at
            if since is None:  # released by a path that did not stamp it: start the clock now
                Pod.objects.filter(pk=pod.pk).update(releasing_since=now)
                continue
            if since + grace <= now:
                lifecycle.release_pod(pod, now)
                touched.add(pod.job_id)
        lifecycle.refresh_job_states(touched, now)

    def _state(self) -> ClusterState:
        from kai_portal.nodes.models import Node

        nodes = {}
        for node in Node.objects.select_related("pool").prefetch_related("gpus"):
            devices = list(node.gpus.all())
            nodes[node.name] = ObservedNode(
                name=node.name,
                pool=node.pool.name,
                labels=dict(node.labels or {}),
                unschedulable=not node.schedulable,
                ready=node.ready,
                pressure_conditions=(),
                gpu_count=len(devices),
                gpu_product=devices[0].model if devices else None,
                gpu_memory_mib=min((d.memory_mib for d in devices), default=None),
                cpu_millis=node.cpu_millicores,
                memory_mib=node.memory_mib,
                max_pods=110,
            )
        return ClusterState(nodes=nodes, pods=_PodsOnDemand(self._pods))

    def _pods(self) -> dict[tuple[str, str], ObservedPod]:
        pods = {}
        live = Pod.objects.exclude(state__in=[PodState.SUCCEEDED, PodState.FAILED]).select_related(
            "job", "job__queue", "node"
        )
        for pod in live.prefetch_related("gpu_devices"):
            job = pod.job
            namespace = job.namespace or job.queue.name
            pods[(namespace, pod.name)] = ObservedPod(
                namespace=namespace,
                name=pod.name,
                uid=str(pod.pk),
                node=pod.node.name if pod.node else None,
                phase="Running" if pod.state == PodState.RUNNING else "Pending",
                status=_STATUS[PodState(pod.state)],
                queue=job.queue.name,
                job=JobRef(namespace, "PodGroup", job.name),
                priority_class=job.priority_class,
                preemptibility=job.preemptibility or None,
                gpu=GpuRequest(
                    whole=job.gpu_count,
                    fraction=float(job.gpu_fraction) if job.gpu_fraction is not None else None,
                    memory_mib=job.gpu_memory_mib,
                    num_devices=job.gpu_fraction_devices,
                ),
                cpu_millis=job.cpu_millicores,
                memory_mib=job.memory_mib,
                created_at=pod.created_at,
                deletion_timestamp=pod.releasing_since,
                gpu_devices=tuple(sorted(d.index for d in pod.gpu_devices.all())),
                labels={},
                annotations={},
            )
        return pods

    # ----- apply ---------------------------------------------------------

    def apply(self, binds: list[Bind], evictions: list[Evict], events: list[PodEvent]) -> ApplyReport:
        """Accept each bind whose node still exists and takes pods; accept every eviction."""
        from kai_portal.nodes.models import Node

        report = ApplyReport()
        names = {b.node for b in binds}
        usable = dict(Node.objects.filter(name__in=names).values_list("name", "schedulable"))
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
        """Nothing to delete: ``lifecycle.cancel_job`` already marked the pods releasing."""
        return ApplyReport([OperationResult("cancel", namespace, job, ok=True)])


def _refused(operation: str, bind: Bind, error: str) -> OperationResult:
    return OperationResult(operation, bind.namespace, bind.pod, ok=False, error=error)
