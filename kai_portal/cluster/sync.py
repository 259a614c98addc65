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
* a job's ``created_at`` is when its group began in the cluster (KAI orders a queue's jobs by
  priority, then their PodGroup's creation time): the creationTimestamp of its top owner
  (``ObservedPod.job_created_at``), else of its earliest pod; never the time of the sync,
  which on a fresh install would put a whole backlog in the order the rows were written. A
  row already holding a later time (written by a sync before this rule) takes the cluster's
  when its pods are seen again; a row never moves later (a pod re-created, a portal job's
  submit time before its pods);
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

Shards (issue 30): a node pool's scheduler observes its pool's share (``ClusterState.cluster_nodes``
set: backends/kubernetes/pool_scope.py) and its sync writes only that share: its pool's nodes
(created, updated, moved into the pool), the rows of its share's jobs, and the rows its pool held
whose node or job is gone from the whole cluster. A node or job that moved to another pool is
left to that pool's sync, never taken for gone.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import Q, QuerySet
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
from kai_portal.cluster.backends.kubernetes import PORTAL_JOB_UID_LABEL
from kai_portal.core import bulk
from kai_portal.core.bulk import chunks
from kai_portal.nodes.models import GpuDevice, Node, NodePool
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
BATCH = 2000  # rows per bulk statement
NODE_FIELDS = [
    "pool", "cpu_millicores", "memory_mib", "schedulable", "ready", "labels", "max_pods", "taints",
    "external_gpus", "external_cpu_millicores", "external_memory_mib", "external_pods", "updated_at",
]  # fmt: skip
JOB_READ = ("pk", "cluster_key", "state", "task_count", "min_member", "created_at", "pod_group_name")
POD_READ = ("pk", "job_id", "name", "uid", "index", "state", "node_id", "releasing_since", "started_at")
POD_WRITE = ["uid", "state", "node", "releasing_since", "started_at"]  # and updated_at, the cycle's stamp
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


def sync_cluster_state(state: ClusterState, now: datetime, pool: str | None = None) -> list[PodEvent]:
    """Make the node, job and pod rows match an observation. Call inside a transaction.

    ``pool``: the observation is that node pool's share (shards); only its rows are written.

    Returns the events to post for pods that got no rows: a pending pod whose
    queue does not exist is told so, as KAI does (``QueueDoesNotExist``).
    """
    share = None if state.cluster_nodes is None else _Share(pool, state)
    nodes = _sync_nodes(state.nodes, state.external, share)
    return _sync_pods(state.pods, nodes, now, share)


@dataclass(frozen=True)
class _Share:
    """A node pool's share of the observation (shards): the pool, and every node and job key of
    the whole cluster, by which a row of the pool's is gone or only elsewhere."""

    pool: str
    cluster_nodes: frozenset[str]
    cluster_jobs: frozenset[str]

    def __init__(self, pool: str | None, state: ClusterState) -> None:
        if pool is None or state.cluster_nodes is None or state.cluster_jobs is None:
            raise ValueError("a pool's share of the cluster needs the pool and the whole cluster's names")
        object.__setattr__(self, "pool", pool)
        object.__setattr__(self, "cluster_nodes", state.cluster_nodes)
        object.__setattr__(self, "cluster_jobs", state.cluster_jobs)


def _sync_nodes(
    observed: dict[str, ObservedNode], external: dict[str, NodeUsage], share: _Share | None = None
) -> dict[str, Node]:
    """Rows follow the observation; only new, changed and gone rows are written (in bulk), so
    a cycle over an unchanged cluster of thousands of nodes writes nothing. A pool's share
    deletes only its own rows whose node the whole cluster no longer has."""
    pools = {p.name: p for p in NodePool.objects.all()}
    rows = {n.name: n for n in Node.objects.select_related("pool")}
    if share is None:
        gone = set(rows) - set(observed)
    else:
        gone = {
            name for name, row in rows.items()
            if row.pool.name == share.pool and name not in share.cluster_nodes
        }  # fmt: skip
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
        held = external.get(name) or NodeUsage()
        wanted = {
            "pool_id": pools[pool_name].pk,
            "cpu_millicores": obs.cpu_millis,
            "memory_mib": obs.memory_mib,
            "schedulable": not obs.unschedulable and not obs.pressure_conditions,
            "ready": obs.ready,
            "labels": dict(obs.labels),
            "max_pods": obs.max_pods,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in obs.taints],
            "external_gpus": held.gpus,
            "external_cpu_millicores": held.cpu_millis,
            "external_memory_mib": held.memory_mib,
            "external_pods": held.pods,
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
    # (node pk, index) -> (pk, model, memory): as columns, not 8,000 model instances every cycle
    have = {
        (node_id, index): (pk, model, memory)
        for pk, node_id, index, model, memory in GpuDevice.objects.values_list(
            "pk", "node_id", "index", "model", "memory_mib"
        )
    }
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
            elif device[1:] != (model, memory):
                changed.append(GpuDevice(pk=device[0], node=node, index=i, model=model, memory_mib=memory))
    ours = {rows[name].pk for name in observed}  # a pool's share: never another pool's devices
    extra = [d[0] for key, d in have.items() if key not in wanted_keys and key[0] in ours]
    if extra:
        GpuDevice.objects.filter(pk__in=extra).delete()
    GpuDevice.objects.bulk_create(created, batch_size=BATCH)
    GpuDevice.objects.bulk_update(changed, ["model", "memory_mib"], batch_size=BATCH)


def _sync_pods(
    observed: dict[tuple[str, str], ObservedPod], nodes: dict[str, Node], now: datetime,
    share: _Share | None = None,
) -> list[PodEvent]:  # fmt: skip
    """Pod rows follow the observation. Rows and device links are read in a few queries; only
    new and changed pods are written (in bulk), and only jobs whose pods changed have their
    state refreshed, so a cycle costs what changed, not the size of the cluster."""
    by_job: dict[str, list[ObservedPod]] = defaultdict(list)
    for pod in observed.values():
        by_job[pod.job.key].append(pod)
    jobs = _jobs_by_key(set(by_job))
    queues = {q.name: q for q in Queue.objects.all()}
    writes = _PodWrites.read(jobs.values(), now)
    events: list[PodEvent] = []
    # (row or None for a job seen for the first time, its observed pods, its key)
    plans: list[tuple[Job | None, list[ObservedPod], str]] = []
    for key, pods in by_job.items():
        job = jobs.get(key)
        if job is None:
            if not _unclaimed(pods):  # else: a portal submission whose transaction has not committed
                plans.append((None, pods, key))
        elif job.state in JobState.active():
            plans.append((job, pods, key))
        else:
            # A finished job keeps the pods it had; any other pod of its key is a new job's
            # (a row without a uid was written before uids were kept: its name decides).
            rows = writes.pods_of.get(job.pk, {})
            known = {row.uid for row in rows.values() if row.uid}
            named = {row.name for row in rows.values() if not row.uid}
            mine = [p for p in pods if p.uid in known or p.name in named]
            new = [p for p in pods if not (p.uid in known or p.name in named)]
            if new:
                plans.append((None, new, key))
            if mine:
                plans.append((job, mine, key))
    # Jobs seen for the first time, created in bulk (a burst of 10,000 bare pods is 10,000 jobs).
    first_seen = {i: _new_job(key, pods, queues) for i, (job, pods, key) in enumerate(plans) if job is None}
    Job.objects.bulk_create([j for j in first_seen.values() if j is not None], batch_size=BATCH)
    for i, (row, pods, _key) in enumerate(plans):
        job = row if row is not None else first_seen[i]
        if job is None:
            events.extend(_queue_missing(pods))
        else:
            writes.job(job, pods, nodes)
    seen = writes.save()
    gone = Pod.objects.exclude(job__cluster_key="").exclude(pk__in=seen).exclude(state__in=ENDED_PODS)
    # A portal job's pods are created in its submit request: one committed after this cycle's
    # observation is not in it yet, and is not gone. (Wall clock: rows are stamped with it.)
    recent = timezone.now() - UNCLAIMED_GRACE
    gone = gone.exclude(state=PodState.PENDING, job__submitter__isnull=False, job__created_at__gt=recent)
    touched = set(writes.touched)
    if share is None:
        touched |= _end_gone(gone, now)
    else:
        for part in chunks(_gone_of_share(gone, share, writes, seen)):
            touched |= _end_gone(gone.filter(pk__in=part), now)
    lifecycle.refresh_job_states(touched, now)
    return events


def _end_gone(gone: QuerySet[Pod], now: datetime) -> set[int]:
    """End the pods no longer in the cluster; returns their jobs."""
    touched = set(gone.values_list("job_id", flat=True))
    # A pod of an ended job (cancelled: the portal deleted it) keeps the reason it ended with.
    gone.exclude(job__state__in=JobState.active()).update(
        state=PodState.FAILED, node=None, finished_at=now, releasing_since=None
    )
    gone.update(
        state=PodState.FAILED, node=None, finished_at=now, reason="The pod no longer exists in the cluster."
    )
    return touched


def _gone_of_share(gone: QuerySet[Pod], share: _Share, writes: _PodWrites, seen: set[int]) -> list[int]:
    """Of the pod rows not seen, those a pool's sync ends: those of its own jobs (observed in its
    share; their rows were read already), and those of jobs gone from the whole cluster that the
    pool held (their node's pool, else, on no node, their queue's). Another pool's rows are never
    read here, so a pool's cycle costs its own share."""
    ids = [row.pk for rows in writes.pods_of.values() for row in rows.values() if row.pk not in seen]
    held = gone.filter(
        Q(node__pool__name=share.pool) | Q(node__isnull=True, job__queue__node_pool__name=share.pool)
    )
    for pk, key in held.values_list("pk", "job__cluster_key"):
        if key not in share.cluster_jobs:
            ids.append(pk)
    return ids


def _jobs_by_key(keys: set[str]) -> dict[str, Job]:
    """The row each observed key belongs to: its active job, else its newest finished one.

    Portal-submitted jobs carry the key of the pod group they will create (``<namespace>/PodGroup/<job>``)
    and are active, so their pods find them here before the cluster has any."""
    out: dict[str, Job] = {}
    # All cluster jobs, not an IN over the keys: SQLite caps a query's parameters.
    # The columns sync reads (a cluster of 10,000 bare pods is 10,000 jobs, read every cycle).
    rows = Job.objects.exclude(cluster_key="").only(*JOB_READ).order_by("pk")
    for job in rows.iterator(chunk_size=2000):
        if job.cluster_key not in keys:
            continue
        current = out.get(job.cluster_key)
        if current is None or job.state in JobState.active() or current.state not in JobState.active():
            out[job.cluster_key] = job
    return out


@dataclass(slots=True)
class _PodRow:
    """The columns of a pod row a sync reads (``POD_READ``) and may change: read as plain
    values, not model instances (building those was about 0.15 ms a pod every cycle)."""

    pk: int
    job_id: int
    name: str
    uid: str
    index: int
    state: str
    node_id: int | None
    releasing_since: datetime | None
    started_at: datetime | None


@dataclass
class _PodWrites:
    """One sync's pod rows and device links, read up front, and what it will write in bulk."""

    now: datetime
    pods_of: dict[int, dict[str, _PodRow]]  # job pk -> pod name -> row
    links: dict[int, set[int]]  # pod pk -> device pks
    device_pk: dict[tuple[int, int], int]  # (node pk, index) -> device pk
    stamp: datetime = field(default_factory=timezone.now)
    created: list[tuple[Pod, list[int]]] = field(default_factory=list)
    changed: list[_PodRow] = field(default_factory=list)
    relink: dict[int, list[int]] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    touched: set[int] = field(default_factory=set)

    @classmethod
    def read(cls, jobs: Iterable[Job], now: datetime) -> _PodWrites:
        # The pods of the observed keys' jobs only (finished history is not read every cycle).
        ids = sorted(j.pk for j in jobs)
        pods_of: dict[int, dict[str, _PodRow]] = defaultdict(dict)
        links: dict[int, set[int]] = defaultdict(set)
        through = Pod.gpu_devices.through
        for part in chunks(ids):
            for values in Pod.objects.filter(job_id__in=part).values_list(*POD_READ):
                row = _PodRow(*values)
                pods_of[row.job_id][row.name] = row
            for pod_id, device_id in through.objects.filter(pod__job_id__in=part).values_list(
                "pod_id", "gpudevice_id"
            ):
                links[pod_id].add(device_id)
        devices = GpuDevice.objects.values_list("pk", "node_id", "index")
        device_pk = {(node_id, index): pk for pk, node_id, index in devices}
        return cls(now, pods_of, links, device_pk)

    def job(self, job: Job, pods: list[ObservedPod], nodes: dict[str, Node]) -> None:
        """One job's observed pods onto its rows (new rows for pods it has not had)."""
        rows = self.pods_of.get(job.pk, {})
        ended = job.state not in JobState.active()
        next_index = max((p.index for p in rows.values()), default=-1) + 1
        for obs in sorted(pods, key=lambda p: p.name):
            row = rows.get(obs.name)
            if row is not None and ended and row.state in ENDED_PODS:
                # A cancelled job's pod ended with the cancel: it stays ended (with its reason)
                # while the cluster deletes it, and never holds resources again.
                self.seen.add(row.pk)
                continue
            node = nodes.get(obs.node or "")
            state = POD_STATE[obs.status]
            devices = sorted(
                self.device_pk[(node.pk, i)] for i in obs.gpu_devices if (node.pk, i) in self.device_pk
            ) if node else []  # fmt: skip
            now_if_running = self.now if state == PodState.RUNNING else None
            if row is None:
                new = Pod(job=job, index=next_index, name=obs.name, uid=obs.uid, state=state, node=node,
                          releasing_since=obs.deletion_timestamp, started_at=now_if_running)  # fmt: skip
                next_index += 1
                self.created.append((new, devices))
                self.touched.add(job.pk)
                continue
            self.seen.add(row.pk)
            started = row.started_at if row.started_at is not None else now_if_running
            wanted = (obs.uid, state, node.pk if node else None, obs.deletion_timestamp, started)
            if (row.uid, row.state, row.node_id, row.releasing_since, row.started_at) != wanted:
                row.uid, row.state, row.node_id, row.releasing_since, row.started_at = wanted
                self.changed.append(row)
                self.touched.add(job.pk)
            if sorted(self.links.get(row.pk, ())) != devices:
                self.relink[row.pk] = devices
                self.touched.add(job.pk)
        # Never capped to the pods seen: a gang with fewer pods than its minimum waits (NotReady),
        # as KAI's PodGroup is not ready until minMember pods exist.
        wanted_min = _min_member(pods)
        min_member = job.min_member if wanted_min is None else wanted_min
        task_count = max(next_index, job.task_count, min_member)
        arrived = _arrived(pods)
        created_at = arrived if arrived is not None and arrived < job.created_at else job.created_at
        pod_group_name = _pod_group_name(pods) or job.pod_group_name
        wanted_job = (task_count, min_member, created_at, pod_group_name)
        if wanted_job != (job.task_count, job.min_member, job.created_at, job.pod_group_name):
            Job.objects.filter(pk=job.pk).update(
                task_count=task_count,
                min_member=min_member,
                created_at=created_at,
                pod_group_name=pod_group_name,
            )
            job.created_at, job.pod_group_name = created_at, pod_group_name
            self.touched.add(job.pk)

    def save(self) -> set[int]:
        """Write the new and changed rows and links; returns the pks of every observed pod's row."""
        Pod.objects.bulk_create([row for row, _ in self.created], batch_size=BATCH)
        for row, devices in self.created:
            self.seen.add(row.pk)
            if devices:
                self.relink[row.pk] = devices
        # One UPDATE ... FROM unnest(arrays) on PostgreSQL (bulk.update_rows), not bulk_update's
        # CASE WHEN per column: building and compiling those was about 1 ms per bound pod on the
        # cycle after its bind (KWOK harness). Same columns, same values.
        rows = [(r.pk, r.uid, r.state, r.node_id, r.releasing_since, r.started_at) for r in self.changed]
        bulk.update_rows(Pod, POD_WRITE, rows, {"updated_at": self.stamp})
        if self.relink:
            through = Pod.gpu_devices.through
            ids = list(self.relink)
            for part in chunks(ids):
                through.objects.filter(pod_id__in=part).delete()
            links = [through(pod_id=pod, gpudevice_id=d) for pod, ds in self.relink.items() for d in ds]
            through.objects.bulk_create(links, batch_size=BATCH)
        return self.seen


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


def _pod_group_name(pods: list[ObservedPod]) -> str:
    """The group's PodGroup name (its pods agree; the first that knows it is taken)."""
    return next((p.pod_group_name for p in pods if p.pod_group_name), "")


def _arrived(pods: list[ObservedPod]) -> datetime | None:
    """When the pods' group began in the cluster: its top owner's creationTimestamp, else the
    earliest pod's (an owner that could not be read)."""
    moments = [m for m in (p.job_created_at or p.created_at for p in pods) if m is not None]
    return min(moments) if moments else None


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
    arrived = _arrived(pods)
    if arrived is not None:
        job.created_at = arrived
    job.pod_group_name = _pod_group_name(pods)
    return job
