"""Bring what a cluster backend observed into the portal's rows (the Kubernetes backend).

The cluster is the source of truth for nodes and pods there:

* nodes: one ``Node`` per observed node (created, updated, deleted), its pool
  from the pool label, its ``GpuDevice`` rows ``0..gpu_count-1``, its taints and
  pod slots, and what pods of other schedulers hold there (``external_*``);
* pods: grouped into jobs by their pod group (``JobRef``); a job seen for the
  first time becomes a ``Job`` row with ``cluster_key`` set, in the queue its
  pods name (``default-queue`` when they name none), its gang minimum from the
  ``kai.scheduler/batch-min-member`` annotation (else 1) and its pods' placement
  rules (node selector, tolerations, node affinity); each pod's phase, node, uid
  and GPU devices are copied onto its ``Pod`` row;
* the gang minimum is never capped to the pods seen so far: a batch Job whose
  pods appear over several cycles waits until its minimum exist (KAI: the
  PodGroup is not ready until minMember pods exist), so ``task_count`` is at
  least the minimum;
* a key (namespace/kind/name) is taken by its active job row; a finished row
  keeps only the pods it had (by uid): a pod deleted and applied again under
  the same name is a new job;
* pods naming a queue that does not exist get no rows: ``sync_cluster_state``
  returns KAI's ``QueueDoesNotExist`` Unschedulable events for the pending ones
  (kai-semantics.md §1.1), which the cycle posts with its other events;
* a pod row of a cluster job whose pod is gone from the cluster ends as failed; a cancelled
  job's pods (deleted by the portal) end with the cancel's reason and the job stays cancelled;
* portal-submitted jobs (``workloads/cluster_jobs.py``) carry ``cluster_key`` from the start,
  so their pods come back to their own rows.

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
    NodeUsage,
    ObservedNode,
    ObservedPod,
    PodEvent,
    TaskStatus,
)
from kai_portal.cluster.backends.kubernetes_objects import PORTAL_JOB_UID_LABEL
from kai_portal.cluster.models import GpuDevice, Node, NodePool
from kai_portal.queues.models import Queue
from kai_portal.workloads import lifecycle
from kai_portal.workloads.choices import PRIORITY_VALUES, JobState, PodState, PriorityClass
from kai_portal.workloads.cluster_jobs import UNCLAIMED_GRACE
from kai_portal.workloads.limits import MAX_TASKS
from kai_portal.workloads.models import Job, Pod

logger = logging.getLogger(__name__)

DEFAULT_POOL = "default"
DEFAULT_QUEUE = "default-queue"  # KAI's fallback for a pod naming no queue (§1.7)
BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"  # overrides minMember (§1.7)
UNKNOWN_GPU_MEMORY_MIB = 1  # "not synced": no GPU-memory request fits (ObservedNode.gpu_memory_mib None)
ENDED_PODS = [PodState.SUCCEEDED, PodState.FAILED]
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
    nodes = _sync_nodes(state.nodes, state.external)
    return _sync_pods(state.pods, nodes, now)


def _sync_nodes(observed: dict[str, ObservedNode], external: dict[str, NodeUsage]) -> dict[str, Node]:
    pools = {p.name: p for p in NodePool.objects.all()}
    rows = {n.name: n for n in Node.objects.all()}
    for name in set(rows) - set(observed):
        rows.pop(name).delete()  # pods keep their rows; their node becomes empty
    for name, obs in observed.items():
        pool_name = obs.pool or DEFAULT_POOL
        if pool_name not in pools:
            pools[pool_name], _ = NodePool.objects.get_or_create(name=pool_name)
        node = rows.get(name) or Node(name=name)
        node.pool = pools[pool_name]
        node.cpu_millicores = obs.cpu_millis
        node.memory_mib = obs.memory_mib
        node.schedulable = not obs.unschedulable and not obs.pressure_conditions
        node.ready = obs.ready
        node.labels = dict(obs.labels)
        node.max_pods = obs.max_pods
        node.taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in obs.taints]
        held = external.get(name) or NodeUsage()
        node.external_gpus = held.gpus
        node.external_cpu_millicores = held.cpu_millis
        node.external_memory_mib = held.memory_mib
        node.external_pods = held.pods
        node.save(validate=False)
        rows[name] = node
        devices = {d.index: d for d in node.gpus.all()}
        GpuDevice.objects.filter(node=node, index__gte=obs.gpu_count).delete()
        for i in range(obs.gpu_count):
            device = devices.get(i) or GpuDevice(node=node, index=i)
            device.model = obs.gpu_product or "unknown"
            device.memory_mib = obs.gpu_memory_mib or UNKNOWN_GPU_MEMORY_MIB
            device.save(validate=False)
    return rows


def _sync_pods(
    observed: dict[tuple[str, str], ObservedPod], nodes: dict[str, Node], now: datetime
) -> list[PodEvent]:
    by_job: dict[str, list[ObservedPod]] = defaultdict(list)
    for pod in observed.values():
        by_job[pod.job.key].append(pod)
    jobs = _jobs_by_key(set(by_job))
    queues = {q.name: q for q in Queue.objects.all()}
    seen: set[int] = set()
    touched: set[int] = set()
    events: list[PodEvent] = []
    for key, pods in by_job.items():
        job = jobs.get(key)
        if job is None and _unclaimed(pods):
            continue  # a portal submission whose transaction has not committed yet
        rows = {p.name: p for p in job.pods.all()} if job is not None else {}
        if job is not None and job.state not in JobState.active():
            # A finished job keeps the pods it had; any other pod of its key is a new job's
            # (a row without a uid was written before uids were kept: its name decides).
            known = {row.uid for row in rows.values() if row.uid}
            named = {row.name for row in rows.values() if not row.uid}
            pods = [p for p in by_job[key] if p.uid in known or p.name in named]
            new = [p for p in by_job[key] if not (p.uid in known or p.name in named)]
            if new:
                events.extend(_sync_job(None, {}, new, key, nodes, queues, now, seen, touched))
            if not pods:
                continue
        events.extend(_sync_job(job, rows, pods, key, nodes, queues, now, seen, touched))
    gone = Pod.objects.exclude(job__cluster_key="").exclude(pk__in=seen).exclude(state__in=ENDED_PODS)
    # A portal job's pods are created in its submit request: one committed after this cycle's
    # observation is not in it yet, and is not gone. (Wall clock: rows are stamped with it.)
    fresh = timezone.now() - UNCLAIMED_GRACE
    gone = gone.exclude(state=PodState.PENDING, job__submitter__isnull=False, job__created_at__gt=fresh)
    touched.update(gone.values_list("job_id", flat=True))
    # A pod of an ended job (cancelled: the portal deleted it) keeps the reason it ended with.
    gone.exclude(job__state__in=JobState.active()).update(
        state=PodState.FAILED, node=None, finished_at=now, releasing_since=None
    )
    gone.update(
        state=PodState.FAILED, node=None, finished_at=now, reason="The pod no longer exists in the cluster."
    )
    lifecycle.refresh_job_states(touched, now)
    return events


def _jobs_by_key(keys: set[str]) -> dict[str, Job]:
    """The row each observed key belongs to: its active job, else its newest finished one.

    Portal-submitted jobs carry the key of the pod group they will create (``<namespace>/PodGroup/<job>``)
    and are active, so their pods find them here before the cluster has any."""
    out: dict[str, Job] = {}
    # All cluster jobs, not an IN over the keys: SQLite caps a query's parameters.
    rows = Job.objects.exclude(cluster_key="").select_related("queue").order_by("pk")
    for job in rows.iterator(chunk_size=2000):
        if job.cluster_key not in keys:
            continue
        current = out.get(job.cluster_key)
        if current is None or job.state in JobState.active() or current.state not in JobState.active():
            out[job.cluster_key] = job
    return out


def _sync_job(
    job: Job | None,
    rows: dict[str, Pod],
    pods: list[ObservedPod],
    key: str,
    nodes: dict[str, Node],
    queues: dict[str, Queue],
    now: datetime,
    seen: set[int],
    touched: set[int],
) -> list[PodEvent]:
    """One job's pods onto its rows (a new job row when ``job`` is None)."""
    if job is None:
        job = _new_job(key, pods, queues)
        if job is None:
            return _queue_missing(pods)
    touched.add(job.pk)
    ended = job.state not in JobState.active()
    next_index = max((p.index for p in rows.values()), default=-1) + 1
    for obs in sorted(pods, key=lambda p: p.name):
        row = rows.get(obs.name)
        if row is None:
            row = Pod(job=job, index=next_index, name=obs.name)
            next_index += 1
        elif ended and row.state in ENDED_PODS:
            # A cancelled job's pod ended with the cancel: it stays ended (with its reason)
            # while the cluster deletes it, and never holds resources again.
            seen.add(row.pk)
            continue
        node = nodes.get(obs.node or "")
        row.uid = obs.uid
        row.state = POD_STATE[obs.status]
        row.node = node
        row.releasing_since = obs.deletion_timestamp
        if row.state == PodState.RUNNING and row.started_at is None:
            row.started_at = now
        row.save()
        seen.add(row.pk)
        device_ids = list(
            GpuDevice.objects.filter(node=node, index__in=obs.gpu_devices).values_list("pk", flat=True)
        ) if node else []  # fmt: skip
        if sorted(device_ids) != sorted(row.gpu_devices.values_list("pk", flat=True)):
            row.gpu_devices.set(device_ids)
    # Never capped to the pods seen: a gang with fewer pods than its minimum waits (NotReady),
    # as KAI's PodGroup is not ready until minMember pods exist.
    wanted = _min_member(pods)
    min_member = job.min_member if wanted is None else wanted
    task_count = max(next_index, job.task_count, min_member)
    if (task_count, min_member) != (job.task_count, job.min_member):
        Job.objects.filter(pk=job.pk).update(task_count=task_count, min_member=min_member)
    return []


def _unclaimed(pods: list[ObservedPod]) -> bool:
    """Pods the portal created (its uid label) for a job row not visible yet: the submitting
    request's transaction commits after it created them. Left alone for ``UNCLAIMED_GRACE``;
    after that (the commit failed and the cleanup too) they are adopted like any cluster pods.
    Wall clock, as the API server stamps the pods (a test cycle's ``now`` may be simulated)."""
    first = pods[0]
    if PORTAL_JOB_UID_LABEL not in first.labels or first.created_at is None:
        return False
    if timezone.now() - first.created_at > UNCLAIMED_GRACE:
        return False
    return not Job.objects.filter(uid=first.labels[PORTAL_JOB_UID_LABEL]).exists()


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
    """The group's minimum from its owner or PodGroup, else the ``batch-min-member`` annotation
    of the job's pods (first by name carrying a valid one)."""
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.min_member is not None:
            return pod.min_member
    for pod in sorted(pods, key=lambda p: p.name):
        try:
            value = int(pod.annotations.get(BATCH_MIN_MEMBER_ANNOTATION, ""))
        except ValueError:
            continue
        if value >= 0:
            return min(value, MAX_TASKS)  # more could never exist; the job waits the same
    return None


def _new_job(key: str, pods: list[ObservedPod], queues: dict[str, Queue]) -> Job | None:
    first = pods[0]
    queue = queues.get(_queue_name(first))
    if queue is None:
        logger.info("pods of %s name no known queue (%r): QueueDoesNotExist", key, _queue_name(first))
        return None
    priority_class = (
        first.priority_class if first.priority_class in PriorityClass.values else PriorityClass.TRAIN
    )
    # The cluster's own value (its PriorityClass), so the engine orders by the real priorities.
    priority = PRIORITY_VALUES[PriorityClass(priority_class)] if first.priority is None else first.priority
    gpu = first.gpu
    wanted = _min_member(pods)
    min_member = 1 if wanted is None else wanted
    job = Job(
        name=first.job.name,
        namespace=first.namespace,
        cluster_key=key,
        queue=queue,
        priority_class=priority_class,
        priority=priority,
        preemptibility=first.preemptibility or "",
        task_count=max(len(pods), min_member),
        min_member=min_member,
        gpu_count=0 if gpu.shared else gpu.whole,
        gpu_fraction=Decimal(str(gpu.fraction)) if gpu.fraction is not None else None,
        gpu_memory_mib=gpu.memory_mib if gpu.fraction is None else None,
        gpu_fraction_devices=gpu.num_devices,
        cpu_millicores=first.cpu_millis,
        memory_mib=first.memory_mib,
        state=JobState.PENDING,
        # A pod group's pods share one spec; the first pod's rules are the job's.
        node_selector=dict(first.node_selector),
        tolerations=[dict(t) for t in first.tolerations],
        node_affinity=dict(first.node_affinity),
    )
    job.save(validate=False)
    return job
