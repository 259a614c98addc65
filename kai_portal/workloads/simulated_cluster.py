"""The simulated cluster: the database rows are the cluster (the portal side of the simulated backend).

Nodes are ``cluster.Node`` rows (from the admin, a cluster file or seed_demo)
and pods are ``workloads.Pod`` rows. Time moves on each ``observe()``, at the
backend's clock:

* a pod bound by the previous cycle starts running;
* a running pod succeeds once ``started_at + job.duration <= now`` (no
  duration: it runs until cancelled or evicted) and frees its GPUs;
* a releasing pod (evicted, cancelled) lets go of its node
  ``SIMULATED_EVICTION_GRACE_SECONDS`` after the eviction, then goes back to
  pending or fails, per its job's restart policy (``lifecycle.release_pod``).

``RowCluster`` is the ``SimulatedCluster`` that ``backends/simulated.py``'s
``SimulatedBackend`` fronts (the backend package writes no rows itself);
``RowBackend`` is that backend over the rows. Cordoning and removing nodes are
``cluster/operations.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from kai_portal.cluster.backends import GpuRequest, JobRef, ObservedNode, ObservedPod, TaskStatus
from kai_portal.cluster.backends.simulated import SimulatedBackend
from kai_portal.nodes.models import Node
from kai_portal.workloads import lifecycle
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Pod

_STATUS = {
    PodState.PENDING: TaskStatus.PENDING,
    PodState.BOUND: TaskStatus.BOUND,
    PodState.RUNNING: TaskStatus.RUNNING,
    PodState.RELEASING: TaskStatus.RELEASING,
    PodState.SUCCEEDED: TaskStatus.SUCCEEDED,
    PodState.FAILED: TaskStatus.FAILED,
}


def eviction_grace() -> timedelta:
    return timedelta(seconds=settings.SIMULATED_EVICTION_GRACE_SECONDS)


class RowCluster:
    """The portal's ``Node`` and ``Pod`` rows as a simulated cluster (a ``SimulatedCluster``)."""

    # The node pool whose pods ``advance`` moves (a pool's cycle); None: every pod.
    pool: str | None = None

    def advance(self, now: datetime) -> None:
        """Start bound pods, finish pods whose duration is over, release evicted pods after the grace.

        One transaction: the cycle's observation."""
        with transaction.atomic():
            self._advance(now)

    def _advance(self, now: datetime) -> None:
        moving = [PodState.BOUND, PodState.RUNNING, PodState.RELEASING]
        pods = Pod.objects.all()
        if self.pool is not None:
            # A pool's cycle (issue 30) moves its own pool's pods only: it never locks another
            # pool's jobs, so two pools' cycles never wait on each other here.
            pods = pods.filter(
                Q(node__pool__name=self.pool) | Q(node__isnull=True, job__queue__node_pool__name=self.pool)
            )
        lifecycle.lock_jobs(pods.filter(state__in=moving).values_list("job_id", flat=True))
        bound = pods.filter(state=PodState.BOUND, node__isnull=False)
        touched = set(bound.values_list("job_id", flat=True))
        lifecycle.start_pods(bound.values_list("pk", flat=True), now)

        done, unhandled = [], {}
        for pod in pods.filter(state=PodState.RUNNING, job__duration__isnull=False).select_related("job"):
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
        for pod in pods.filter(state=PodState.RELEASING).select_related("job"):
            since = pod.releasing_since or pod.reason_at
            if since is None:  # released by a path that did not stamp it: start the clock now
                Pod.objects.filter(pk=pod.pk).update(releasing_since=now)
                continue
            if since + grace <= now:
                lifecycle.release_pod(pod, now)
                touched.add(pod.job_id)
        lifecycle.refresh_job_states(touched, now)

    def nodes(self) -> dict[str, ObservedNode]:
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
        return nodes

    def pods(self) -> dict[tuple[str, str], ObservedPod]:
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

    def schedulable(self, names: set[str]) -> dict[str, bool]:
        return dict(Node.objects.filter(name__in=names).values_list("name", "schedulable"))


class RowBackend(SimulatedBackend):
    """The simulated backend over the portal's rows, at ``clock`` (default: now)."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.row_cluster = RowCluster()
        super().__init__(self.row_cluster, clock or timezone.now)

    def scope_to_pool(self, pool: str, queue_pools: Mapping[str, str] | None = None) -> None:
        """Observe (move on) only this node pool's pods: the backend of one pool's cycle (the rows
        know each queue's pool: ``queue_pools`` is not needed)."""
        self.row_cluster.pool = pool
