"""Bring what a cluster backend observed into the portal's rows (the Kubernetes backend).

The cluster is the source of truth for nodes and pods there:

* nodes: one ``Node`` per observed node (created, updated, deleted), its pool
  from the pool label, its ``GpuDevice`` rows ``0..gpu_count-1``;
* pods: grouped into jobs by their pod group (``JobRef``); a job seen for the
  first time becomes a ``Job`` row with ``cluster_key`` set, in the queue its
  pods name (``default-queue`` when they name none), its gang minimum from the
  ``kai.scheduler/batch-min-member`` annotation (else 1), capped to the pods
  seen; each pod's phase, node and GPU devices are copied onto its ``Pod`` row;
* pods naming a queue that does not exist get no rows: ``sync_cluster_state``
  returns KAI's ``QueueDoesNotExist`` Unschedulable events for the pending ones
  (kai-semantics.md §1.1), which the cycle posts with its other events;
* a pod row of a cluster job whose pod is gone from the cluster ends as failed.

The simulated backend never needs this: its rows are its cluster.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from kai_portal.cluster.backends import (
    ClusterState,
    EventType,
    ObservedNode,
    ObservedPod,
    PodEvent,
    TaskStatus,
)
from kai_portal.cluster.models import GpuDevice, Node, NodePool
from kai_portal.queues.models import Queue
from kai_portal.workloads import lifecycle
from kai_portal.workloads.choices import PRIORITY_VALUES, JobState, PodState, PriorityClass
from kai_portal.workloads.models import Job, Pod

logger = logging.getLogger(__name__)

DEFAULT_POOL = "default"
DEFAULT_QUEUE = "default-queue"  # KAI's fallback for a pod naming no queue (§1.7)
BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"  # overrides minMember (§1.7)
BATCH = 2000  # rows per bulk statement
NODE_FIELDS = ["pool", "cpu_millicores", "memory_mib", "schedulable", "ready", "labels", "updated_at"]
POD_READ = ("pk", "job_id", "name", "index", "state", "node_id", "releasing_since", "started_at")
UNKNOWN_GPU_MEMORY_MIB = 1  # "not synced": no GPU-memory request fits (ObservedNode.gpu_memory_mib None)
POD_STATE = {
    TaskStatus.PENDING: PodState.PENDING,
    TaskStatus.GATED: PodState.PENDING,
    TaskStatus.BOUND: PodState.BOUND,
    TaskStatus.RUNNING: PodState.RUNNING,
    TaskStatus.RELEASING: PodState.RELEASING,
    TaskStatus.SUCCEEDED: PodState.SUCCEEDED,
    TaskStatus.FAILED: PodState.FAILED,
    TaskStatus.UNKNOWN: PodState.FAILED,
}


def sync_cluster_state(state: ClusterState, now: datetime) -> list[PodEvent]:
    """Make the node, job and pod rows match an observation. Call inside a transaction.

    Returns the events to post for pods that got no rows: a pending pod whose
    queue does not exist is told so, as KAI does (``QueueDoesNotExist``).
    """
    nodes = _sync_nodes(state.nodes)
    return _sync_pods(state.pods, nodes, now)


def _sync_nodes(observed: dict[str, ObservedNode]) -> dict[str, Node]:
    """Rows follow the observation; only new, changed and gone rows are written (in bulk), so
    a cycle over an unchanged cluster of thousands of nodes writes nothing."""
    pools = {p.name: p for p in NodePool.objects.all()}
    rows = {n.name: n for n in Node.objects.all()}
    gone = set(rows) - set(observed)
    if gone:
        Node.objects.filter(name__in=gone).delete()  # pods keep their rows; their node becomes empty
        for name in gone:
            rows.pop(name)
    stamp = timezone.now()
    created: list[Node] = []
    changed: list[Node] = []
    for name, obs in observed.items():
        pool_name = obs.pool or DEFAULT_POOL
        if pool_name not in pools:
            pools[pool_name], _ = NodePool.objects.get_or_create(name=pool_name)
        wanted = {
            "pool_id": pools[pool_name].pk,
            "cpu_millicores": obs.cpu_millis,
            "memory_mib": obs.memory_mib,
            "schedulable": not obs.unschedulable and not obs.pressure_conditions,
            "ready": obs.ready,
            "labels": dict(obs.labels),
        }
        node = rows.get(name)
        if node is None:
            node = Node(
                name=name, pool=pools[pool_name], **{k: v for k, v in wanted.items() if k != "pool_id"}
            )
            created.append(node)
            rows[name] = node
        elif any(getattr(node, k) != v for k, v in wanted.items()):
            for k, v in wanted.items():
                setattr(node, k, v)
            node.updated_at = stamp
            changed.append(node)
    Node.objects.bulk_create(created, batch_size=BATCH)
    Node.objects.bulk_update(changed, NODE_FIELDS, batch_size=BATCH)
    _sync_devices(observed, rows)
    return rows


def _sync_devices(observed: dict[str, ObservedNode], rows: dict[str, Node]) -> None:
    """Each node's ``GpuDevice`` rows ``0..gpu_count-1`` with the observed model and memory."""
    have: dict[tuple[int, int], GpuDevice] = {(d.node_id, d.index): d for d in GpuDevice.objects.all()}
    created: list[GpuDevice] = []
    changed: list[GpuDevice] = []
    wanted_keys: set[tuple[int, int]] = set()
    for name, obs in observed.items():
        node = rows[name]
        model = obs.gpu_product or "unknown"
        memory = obs.gpu_memory_mib or UNKNOWN_GPU_MEMORY_MIB
        for i in range(obs.gpu_count):
            wanted_keys.add((node.pk, i))
            device = have.get((node.pk, i))
            if device is None:
                created.append(GpuDevice(node=node, index=i, model=model, memory_mib=memory))
            elif (device.model, device.memory_mib) != (model, memory):
                device.model, device.memory_mib = model, memory
                changed.append(device)
    ours = {n.pk for n in rows.values()}
    extra = [d.pk for key, d in have.items() if key not in wanted_keys and key[0] in ours]
    if extra:
        GpuDevice.objects.filter(pk__in=extra).delete()
    GpuDevice.objects.bulk_create(created, batch_size=BATCH)
    GpuDevice.objects.bulk_update(changed, ["model", "memory_mib"], batch_size=BATCH)


def _sync_pods(
    observed: dict[tuple[str, str], ObservedPod], nodes: dict[str, Node], now: datetime
) -> list[PodEvent]:
    """Pod rows follow the observation. All rows and device links are read in three queries;
    only new and changed pods are written (in bulk), and only jobs whose pods changed have their
    state refreshed, so a cycle costs what changed, not the size of the cluster."""
    by_job: dict[str, list[ObservedPod]] = defaultdict(list)
    for pod in observed.values():
        by_job[pod.job.key].append(pod)
    jobs = {j.cluster_key: j for j in Job.objects.exclude(cluster_key="").select_related("queue")}
    queues = {q.name: q for q in Queue.objects.all()}
    pods_of: dict[int, dict[str, Pod]] = defaultdict(dict)
    for row in Pod.objects.exclude(job__cluster_key="").only(*POD_READ):
        pods_of[row.job_id][row.name] = row
    through = Pod.gpu_devices.through
    links: dict[int, set[int]] = defaultdict(set)
    for pod_id, device_id in through.objects.filter(pod__job__cluster_key__gt="").values_list(
        "pod_id", "gpudevice_id"
    ):
        links[pod_id].add(device_id)
    device_pk = dict(
        ((node_id, index), pk)
        for pk, node_id, index in GpuDevice.objects.values_list("pk", "node_id", "index")
    )
    seen: set[int] = set()
    touched: set[int] = set()
    events: list[PodEvent] = []
    created: list[tuple[Pod, list[int]]] = []
    changed: list[Pod] = []
    relink: dict[int, list[int]] = {}
    stamp = timezone.now()
    # Jobs seen for the first time, created in bulk (a burst of 10,000 bare pods is 10,000 jobs).
    fresh = {key: _new_job(key, pods, queues) for key, pods in by_job.items() if key not in jobs}
    Job.objects.bulk_create([j for j in fresh.values() if j is not None], batch_size=BATCH)
    for key, pods in by_job.items():
        job = jobs.get(key) or fresh.get(key)
        if job is None:
            events.extend(_queue_missing(pods))
            continue
        rows = pods_of.get(job.pk, {})
        next_index = max((p.index for p in rows.values()), default=-1) + 1
        for obs in sorted(pods, key=lambda p: p.name):
            node = nodes.get(obs.node or "")
            state = POD_STATE[obs.status]
            device_ids = (
                sorted(device_pk[(node.pk, i)] for i in obs.gpu_devices if (node.pk, i) in device_pk)
                if node
                else []
            )
            existing = rows.get(obs.name)
            if existing is None:
                row = Pod(job=job, index=next_index, name=obs.name, state=state, node=node,
                          releasing_since=obs.deletion_timestamp,
                          started_at=now if state == PodState.RUNNING else None)  # fmt: skip
                next_index += 1
                created.append((row, device_ids))
                touched.add(job.pk)
                continue
            row = existing
            seen.add(row.pk)
            node_id = node.pk if node else None
            started = row.started_at if row.started_at is not None or state != PodState.RUNNING else now
            if (row.state, row.node_id, row.releasing_since, row.started_at) != (
                state, node_id, obs.deletion_timestamp, started
            ):  # fmt: skip
                row.state, row.node_id, row.releasing_since, row.started_at = (
                    state, node_id, obs.deletion_timestamp, started
                )  # fmt: skip
                row.updated_at = stamp
                changed.append(row)
                touched.add(job.pk)
            if sorted(links.get(row.pk, ())) != device_ids:
                relink[row.pk] = device_ids
                touched.add(job.pk)
        task_count = max(next_index, job.task_count)
        wanted = _min_member(pods)
        min_member = job.min_member
        if wanted is not None and min(wanted, task_count) != job.min_member:
            # More pods of a batch job seen: the cap to the pods seen rises with them.
            min_member = min(wanted, task_count)
        if (task_count, min_member) != (job.task_count, job.min_member):
            Job.objects.filter(pk=job.pk).update(task_count=task_count, min_member=min_member)
            touched.add(job.pk)
    Pod.objects.bulk_create([row for row, _ in created], batch_size=BATCH)
    for row, device_ids in created:
        seen.add(row.pk)
        if device_ids:
            relink[row.pk] = device_ids
    Pod.objects.bulk_update(changed, ["state", "node", "releasing_since", "started_at", "updated_at"],
                            batch_size=BATCH)  # fmt: skip
    if relink:
        through.objects.filter(pod_id__in=list(relink)).delete()
        through.objects.bulk_create(
            (through(pod_id=pod_id, gpudevice_id=d) for pod_id, ids in relink.items() for d in ids),
            batch_size=BATCH,
        )
    gone = (
        Pod.objects.exclude(job__cluster_key="")
        .exclude(pk__in=seen)
        .exclude(state__in=[PodState.SUCCEEDED, PodState.FAILED])
    )
    touched.update(gone.values_list("job_id", flat=True))
    gone.update(
        state=PodState.FAILED, node=None, finished_at=now, reason="The pod no longer exists in the cluster."
    )
    lifecycle.refresh_job_states(touched, now)
    return events


def _queue_name(pod: ObservedPod) -> str:
    return pod.queue or DEFAULT_QUEUE


def _queue_missing(pods: list[ObservedPod]) -> list[PodEvent]:
    """KAI's fit error for a job whose queue does not exist (§1.1), one event per pending pod."""
    message = f"Queue '{_queue_name(pods[0])}' does not exist"
    return [
        PodEvent(pod.namespace, pod.name, EventType.WARNING, "Unschedulable", message)
        for pod in sorted(pods, key=lambda p: p.name)
        if pod.status == TaskStatus.PENDING
    ]


def _min_member(pods: list[ObservedPod]) -> int | None:
    """The ``batch-min-member`` annotation of the job's pods (first by name carrying a valid one)."""
    for pod in sorted(pods, key=lambda p: p.name):
        try:
            value = int(pod.annotations.get(BATCH_MIN_MEMBER_ANNOTATION, ""))
        except ValueError:
            continue
        if value >= 0:
            return value
    return None


def _new_job(key: str, pods: list[ObservedPod], queues: dict[str, Queue]) -> Job | None:
    """The row of a job seen for the first time (unsaved: created in bulk), or None when its
    pods name no known queue."""
    first = pods[0]
    queue = queues.get(_queue_name(first))
    if queue is None:
        logger.info("pods of %s name no known queue (%r): QueueDoesNotExist", key, _queue_name(first))
        return None
    priority_class = (
        first.priority_class if first.priority_class in PriorityClass.values else PriorityClass.TRAIN
    )
    gpu = first.gpu
    wanted = _min_member(pods)
    job = Job(
        name=first.job.name,
        namespace=first.namespace,
        cluster_key=key,
        queue=queue,
        priority_class=priority_class,
        priority=PRIORITY_VALUES[PriorityClass(priority_class)],
        preemptibility=first.preemptibility or "",
        task_count=len(pods),
        min_member=min(1 if wanted is None else wanted, len(pods)),
        gpu_count=0 if gpu.shared else gpu.whole,
        gpu_fraction=Decimal(str(gpu.fraction)) if gpu.fraction is not None else None,
        gpu_memory_mib=gpu.memory_mib if gpu.fraction is None else None,
        gpu_fraction_devices=gpu.num_devices,
        cpu_millicores=first.cpu_millis,
        memory_mib=first.memory_mib,
        state=JobState.PENDING,
    )
    return job
