"""Rows to engine: build the ``scheduler.Snapshot`` of one cycle from the database.

The only place that turns portal rows into engine data classes (the reverse
is ``scheduling/results.py``). One query per model; no model instance leaks
into the engine.

The engine keys tasks and jobs by name, so keys must be unique in a snapshot.
A job keeps its own name as its key unless another job in the snapshot has it
too (two teams may both run ``train``); then its key is ``<name>-<pk>``.
``SnapshotIndex`` maps every engine key back to its row, and words the engine's
reasons with the cluster's own names (``SnapshotIndex.text``): a key never
reaches a text.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db.models import F, TextField
from django.db.models.functions import Cast

import scheduler
from kai_portal.core import bulk
from kai_portal.nodes.models import GpuDevice, Node
from kai_portal.queues.models import Queue
from kai_portal.scheduling import backlog, usage
from kai_portal.scheduling.engine import (
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    MatchExpression,
    PreferredTerm,
    Taint,
    Toleration,
    gc_paused,
)
from kai_portal.workloads.choices import JobState, PodState, Preemptibility
from kai_portal.workloads.models import Job, Pod

DEFAULT_POOL = "default"
DEFAULT_GPU_MEMORY_MIB = 81920

_ENGINE_STATE = {
    PodState.PENDING: scheduler.TaskState.PENDING,
    # The engine has no Bound: a bound pod holds its node and is charged like a running one.
    PodState.BOUND: scheduler.TaskState.RUNNING,
    PodState.RUNNING: scheduler.TaskState.RUNNING,
    PodState.RELEASING: scheduler.TaskState.RELEASING,
}


class PodRef(NamedTuple):
    """The row behind one engine task (a named tuple: 50,000 of them per cycle at scale, and a
    frozen dataclass costs several times as much to make)."""

    pod_id: int
    job_id: int
    name: str  # the pod's own name (in the cluster)
    namespace: str
    state: str
    node_id: int | None
    reason: str


class JobRef(NamedTuple):
    """The row behind one engine job."""

    job_id: int
    name: str  # the job's own name (the pod group in the cluster)
    namespace: str
    queue_id: int
    message: str


@dataclass
class SnapshotIndex:
    """Engine names back to rows, for writing the result and talking to the cluster."""

    tasks: dict[str, PodRef] = field(default_factory=dict)
    jobs: dict[str, JobRef] = field(default_factory=dict)
    queues: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    node_pools: dict[str, str] = field(default_factory=dict)
    # (node id, device index) -> GpuDevice id
    devices: dict[tuple[int, int], int] = field(default_factory=dict)
    capacity: dict[str, float] = field(default_factory=dict)
    # Jobs left out because their rows could not be converted (job id -> what was wrong):
    # the cycle fails them, so one bad row never stops scheduling for everyone.
    unhandled: dict[int, str] = field(default_factory=dict)
    # A large backlog (``backlog.py``): jobs listed with only part of their pending pods (job id ->
    # (engine name, index of the last pending pod listed)), and per queue id the jobs this cycle
    # did not consider, with the reason their pending pods get.
    hidden: dict[int, tuple[str, int]] = field(default_factory=dict)
    left_out: dict[int, tuple[str, list[int]]] = field(default_factory=dict)
    # Reasons worded so far, by id (the reason is kept, so its id is not reused): one job message
    # is the reason of each of its pending pods, and is written as an event, a pod reason and history.
    _texts: dict[int, tuple[scheduler.Reason, str]] = field(default_factory=dict, repr=False)

    def shown(self, ref: scheduler.Ref) -> str:
        """A task or job as the cluster names it (``ref.key`` is the engine's key for it)."""
        row = self.jobs.get(ref.key) if ref.kind == "job" else self.tasks.get(ref.key)
        return ref.key if row is None else row.name

    def text(self, reason: scheduler.Reason) -> str:
        """``reason`` worded as KAI words it, naming pods and workloads as the cluster does."""
        hit = self._texts.get(id(reason))
        if hit is not None and hit[0] is reason:
            return hit[1]
        text = scheduler.render(reason, self.shown)
        self._texts[id(reason)] = (reason, text)
        return text


@dataclass
class CycleInput:
    snapshot: scheduler.Snapshot
    config: scheduler.Config
    index: SnapshotIndex


def build_snapshot(now: datetime) -> CycleInput:
    """The engine's view of the cluster at ``now``: queue tree, nodes, active jobs and their pods."""
    with gc_paused():
        return _build(now)


def _build(now: datetime) -> CycleInput:
    index = SnapshotIndex()
    nodes = _nodes(index)
    queues = _queues(index)
    plan = backlog.plan(nodes, queues, index.queues)
    jobs = _jobs(now, index, plan)
    _leave_out(queues, plan, index)
    config = scheduler.Config(
        now=now,
        usage_window_hours=settings.FAIRSHARE_USAGE_WINDOW_HOURS,
        usage_half_life_hours=settings.FAIRSHARE_USAGE_HALF_LIFE_HOURS,
        usage_k=settings.FAIRSHARE_USAGE_K,
    )
    if config.usage_enabled:
        history = usage.historical_usage(
            now, index.capacity, config.usage_window_hours, config.usage_half_life_hours
        )
        for q in queues:
            q.historical_usage = history.get(q.name, {})
    return CycleInput(scheduler.Snapshot(nodes=nodes, queues=queues, jobs=jobs), config, index)


NODE_COLUMNS = ("pk", "name", "pool__name", "cpu_millicores", "memory_mib", "labels_text", "taints_text",
                "schedulable", "ready", "max_pods", "external_gpus", "external_cpu_millicores",
                "external_memory_mib", "external_pods")  # fmt: skip


def _nodes(index: SnapshotIndex) -> list[scheduler.Node]:
    # Nodes and devices as columns (5,000 nodes and 40,000 devices at scale), devices in index
    # order per node.
    by_node: dict[int, list[tuple[int, int, int]]] = {}
    for node_id, d_index, d_pk, d_memory in GpuDevice.objects.order_by("node_id", "index").values_list(
        "node_id", "index", "pk", "memory_mib"
    ):
        by_node.setdefault(node_id, []).append((d_index, d_pk, d_memory))
    rows = Node.objects.annotate(labels_text=_text("labels"), taints_text=_text("taints")).values_list(
        *NODE_COLUMNS
    )
    out = []
    capacity = dict.fromkeys(("gpu", "cpu", "memory"), 0.0)
    for (pk, name, pool, cpu, memory, labels, taints, schedulable, ready, max_pods,
         ext_gpus, ext_cpu, ext_memory, ext_pods) in rows:  # fmt: skip
        devices = by_node.get(pk, [])
        index.nodes[name] = pk
        index.node_pools[name] = pool
        for d_index, d_pk, _memory in devices:
            index.devices[(pk, d_index)] = d_pk
        node = scheduler.Node(
            name=name,
            gpus=len(devices),
            # The engine assumes identical devices on a node; the smallest is the safe figure.
            gpu_memory_mib=float(min((m for _i, _pk, m in devices), default=DEFAULT_GPU_MEMORY_MIB)),
            cpu_millis=float(cpu),
            memory_mib=float(memory),
            pool=pool,
            labels={str(k): str(v) for k, v in (_json(labels) or {}).items()},
            unschedulable=not (schedulable and ready),
            max_pods=int(max_pods),
            taints=_taints(_json(taints)),
            external=scheduler.ExternalUsage(
                gpus=int(ext_gpus),
                cpu_millis=float(ext_cpu),
                memory_mib=float(ext_memory),
                pods=int(ext_pods),
            ),
        )
        if not node.unschedulable:
            # What other schedulers' pods hold is nobody's share (as the engine's pool capacity).
            capacity["gpu"] += max(0, node.gpus - node.external.gpus)
            capacity["cpu"] += max(0.0, node.cpu_millis - node.external.cpu_millis)
            capacity["memory"] += max(0.0, node.memory_mib - node.external.memory_mib)
        out.append(node)
    index.capacity = capacity
    return out


def _text(field: str) -> Cast:
    """A JSON column read as its text, so the common empty ``{}`` / ``[]`` needs no parsing."""
    return Cast(field, output_field=TextField())


_EMPTY_JSON: dict[str, Callable[[], object]] = {"{}": dict, "[]": list, "null": lambda: None}


def _json(text: str | None) -> Any:
    """A JSON column's value from its text (see ``_text``)."""
    if text is None:
        return None
    empty = _EMPTY_JSON.get(text)
    return empty() if empty is not None else json.loads(text)


def _taints(raw: object) -> list[Taint]:
    """Node.taints rows ({key, value, effect}) as the engine's; a malformed entry is skipped
    (the cluster sync writes only valid ones; a hand-edited row must not stop the cycle)."""
    out = []
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, dict) and t.get("key") and t.get("effect") in TAINT_EFFECTS:
            out.append(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])))
    return out


Placement = tuple[dict[str, str], list[Toleration], list[tuple[MatchExpression, ...]], list[PreferredTerm]]


def _placement(job: JobColumns) -> Placement:
    """The job's placement rules (Kubernetes' shape in its JSON fields) as engine fields.

    Raises ValueError on a malformed rule: the job is then left out and failed (``unhandled``),
    never placed without the rule it asked for."""
    if not (job.node_selector or job.tolerations or job.node_affinity):
        return {}, [], [], []  # most jobs: nothing to convert
    selector = job.node_selector or {}
    if not isinstance(selector, dict):
        raise ValueError("node_selector must be a mapping")
    tolerations = []
    for t in job.tolerations or []:
        if not isinstance(t, dict):
            raise ValueError(f"bad toleration {t!r}")
        operator = t.get("operator") or "Equal"
        effect = t.get("effect") or ""
        if operator not in ("Equal", "Exists") or (effect and effect not in TAINT_EFFECTS):
            raise ValueError(f"bad toleration {t!r}")
        tolerations.append(Toleration(str(t.get("key") or ""), operator, str(t.get("value") or ""), effect))
    affinity = job.node_affinity or {}
    if not isinstance(affinity, dict):
        raise ValueError("node_affinity must be a mapping")
    required = [_expressions(term) for term in affinity.get("required") or []]
    preferred = [
        PreferredTerm(int(p["weight"]), _expressions(p["expressions"]))
        for p in affinity.get("preferred") or []
    ]
    return {str(k): str(v) for k, v in selector.items()}, tolerations, required, preferred


def _expressions(term: object) -> tuple[MatchExpression, ...]:
    if not isinstance(term, list) or not all(isinstance(e, dict) for e in term):
        raise ValueError("a node affinity term must be a list of expressions")
    out = []
    for e in term:
        if e.get("operator") not in MATCH_OPERATORS:
            raise ValueError(f"bad node affinity operator {e.get('operator')!r}")
        values = e.get("values") or []
        if not isinstance(values, list):
            raise ValueError("node affinity values must be a list")
        out.append(MatchExpression(str(e["key"]), str(e["operator"]), tuple(str(v) for v in values)))
    return tuple(out)


def _seconds(value: object) -> float | None:
    return None if value is None else float(value.total_seconds())  # type: ignore[attr-defined]


def _queues(index: SnapshotIndex) -> list[scheduler.Queue]:
    rows = list(Queue.objects.select_related("parent", "node_pool").order_by("created_at", "pk"))
    out = []
    for position, row in enumerate(rows):
        index.queues[row.name] = row.pk
        out.append(_engine_queue(row, position))
    return out


def _engine_queue(row: Queue, position: int) -> scheduler.Queue:
    return scheduler.Queue(
        name=row.name,
        parent=row.parent.name if row.parent else None,
        priority=row.priority,
        resources={
            r: scheduler.QueueResource(
                quota=float(getattr(row, f"{r}_quota")),
                limit=float(getattr(row, f"{r}_limit")),
                over_quota_weight=float(getattr(row, f"{r}_over_quota_weight")),
            )
            for r in ("gpu", "cpu", "memory")
        },
        reclaim_min_runtime_s=_seconds(row.reclaim_min_runtime),
        preempt_min_runtime_s=_seconds(row.preempt_min_runtime),
        created_index=position,
        pool=row.node_pool.name,
    )


def _age(now: datetime, moment: datetime | None) -> float | None:
    return None if moment is None else max(0.0, (now - moment).total_seconds())


@dataclass(frozen=True, slots=True)
class JobColumns:
    """The columns of a job row the engine needs (read as plain values: at 12,500 jobs, model
    instances with their queue and pool cost a second per cycle)."""

    pk: int
    name: str
    namespace: str
    queue_id: int
    queue_name: str
    pool_name: str | None
    message: str
    priority: int
    preemptibility: str
    min_member: int
    created_at: datetime | None
    started_at: datetime | None
    stale_since: datetime | None
    last_evicted_at: datetime | None
    node_selector: Any
    tolerations: Any
    node_affinity: Any
    gpu: float  # per task: the fraction, else the whole GPUs
    gpu_memory_mib: float
    gpu_fraction_devices: int
    cpu_millis: float
    memory_mib: float

    @classmethod
    def of(cls, job: Job) -> JobColumns:
        """An (unsaved) job model's columns, e.g. for a what-if preview."""
        return cls(
            job.pk, job.name, job.namespace, job.queue_id, job.queue.name,
            job.node_pool.name if job.node_pool else None, job.message, job.priority, job.preemptibility,
            job.min_member, job.created_at, job.started_at, job.stale_since, job.last_evicted_at,
            job.node_selector, job.tolerations, job.node_affinity,
            *_task_shape(job.gpu_fraction, job.gpu_count, job.gpu_memory_mib, job.gpu_fraction_devices,
                         job.cpu_millicores, job.memory_mib),
        )  # fmt: skip


JOB_COLUMNS = ("pk", "name", "namespace", "queue_id", "queue__name", "node_pool__name", "message", "priority",
               "preemptibility", "min_member", "created_at", "started_at", "stale_since", "last_evicted_at",
               "selector_text", "tolerations_text", "affinity_text", "gpu_fraction", "gpu_count",
               "gpu_memory_mib", "gpu_fraction_devices", "cpu_millicores", "memory_mib")  # fmt: skip


def _task_shape(
    fraction: object, count: object, gpu_memory: object, devices: object, cpu: object, memory: object
) -> tuple[float, float, int, float, float]:
    """What each task of a job asks for, as the engine's numbers (fraction wins over count)."""
    gpu = float(fraction) if fraction is not None else float(count)  # type: ignore[arg-type]
    return gpu, float(gpu_memory or 0), int(devices or 1), float(cpu), float(memory)  # type: ignore[arg-type, call-overload]


def _job_columns(job_ids: list[int], unhandled: dict[int, str]) -> dict[int, JobColumns]:
    """The rows of these jobs as ``JobColumns``; a row that does not convert is left out and
    what was wrong recorded in ``unhandled``."""
    out: dict[int, JobColumns] = {}
    jobs = Job.objects.annotate(
        selector_text=_text("node_selector"), tolerations_text=_text("tolerations"),
        affinity_text=_text("node_affinity"),
    )  # fmt: skip
    for part in bulk.id_slices(job_ids):
        for row in jobs.filter(bulk.AnyOf(F("pk"), part)).values_list(*JOB_COLUMNS):
            try:
                out[row[0]] = JobColumns(  # type: ignore[call-arg]  # (the columns in JOB_COLUMNS' order)
                    *row[:14], _json(row[14]), _json(row[15]), _json(row[16]), *_task_shape(*row[17:])
                )
            except (ArithmeticError, ValueError, TypeError) as error:  # JSONDecodeError is a ValueError
                unhandled[row[0]] = f"{type(error).__name__}: {str(error)[:200]}"
    return out


def _leave_out(queues: list[scheduler.Queue], plan: backlog.Plan, index: SnapshotIndex) -> None:
    """The pending requests of the jobs the plan left out go to their engine queue's ``unlisted``."""
    by_id = {index.queues[q.name]: q for q in queues}
    for queue_id, items in plan.left_out.items():
        queue = by_id[queue_id]
        queue.unlisted = [(task, count) for _pk, task, count in items]
        text = backlog.not_considered_text(queue.name, queue.pool or DEFAULT_POOL)
        index.left_out[queue_id] = (text, [pk for pk, _task, _count in items])


def _jobs(now: datetime, index: SnapshotIndex, plan: backlog.Plan | None = None) -> list[scheduler.Job]:
    """Active jobs with their alive pods, plus releasing pods of ended jobs (they still hold nodes).

    Pods, their devices and job rows are read as plain columns, in one pass over the pods (at
    50,000 pods, model instances per pod or per job dominated the cycle). A job that cannot be
    converted (a value out of range) is left out and recorded in ``index.unhandled``: one bad
    row never stops the cycle for everyone else."""
    pods = Pod.objects.filter(state__in=list(_ENGINE_STATE)).exclude(
        state=PodState.PENDING, job__state__in=[s for s in JobState.values if s not in JobState.active()]
    )
    heavy = plan.heavy_queues if plan is not None else set()
    columns = ("pk", "job_id", "name", "index", "state", "node_id", "reason")
    rows: Iterable[PodRow]
    if heavy:
        # The large queues' pending pods: only those the plan lists (``backlog.py``).
        pods = pods.exclude(state=PodState.PENDING, job__queue_id__in=list(heavy))
        read = list(pods.order_by("job_id", "index").values_list(*columns))
        rows = _with_listed_pending(read, plan, columns)  # type: ignore[arg-type]
    else:
        rows = pods.order_by("job_id", "index").values_list(*columns)  # type: ignore[assignment]
    # Device indices from the devices ``_nodes`` read (no join): device id -> index.
    device_index = {pk: d_index for (_node, d_index), pk in index.devices.items()}
    devices: dict[int, list[int]] = {}
    through = Pod.gpu_devices.through.objects.filter(pod__in=pods.values("pk"))
    for pod_id, device_id in through.values_list("pod_id", "gpudevice_id"):
        devices.setdefault(pod_id, []).append(device_index[device_id])
    node_names = {pk: name for name, pk in index.nodes.items()}
    by_job: dict[int, list[PodRow]] = {}
    for row in rows:
        pods_of = by_job.get(row[1])
        if pods_of is None:
            by_job[row[1]] = [row]
        else:
            pods_of.append(row)
    job_rows = _job_columns(list(by_job), index.unhandled)
    taken = Counter(job.name for job in job_rows.values())
    used_tasks: set[str] = set()
    out = []
    for job_id, job_pods in by_job.items():
        job = job_rows.get(job_id)
        if job is None:
            continue  # its row did not convert: in ``index.unhandled``
        engine_name = job.name if taken[job.name] == 1 else f"{job.name}-{job.pk}"
        namespace = job.namespace or job.queue_name
        listed = plan.truncated(job_id) if plan is not None else None
        more = plan.pending[job_id] - listed if listed is not None and plan is not None else 0
        try:
            tasks, refs = _job_tasks(job, job_pods, engine_name, namespace, used_tasks, devices, node_names)
            engine_job = _engine_job(job, engine_name, namespace, tasks, now, more_pending=more)
        except (ArithmeticError, ValueError, TypeError, KeyError) as error:
            index.unhandled[job.pk] = f"{type(error).__name__}: {str(error)[:200]}"
            continue
        index.jobs[engine_name] = JobRef(job.pk, job.name, namespace, job.queue_id, job.message)
        index.tasks.update(refs)
        used_tasks.update(refs)
        if more:
            last = max(row[3] for row in job_pods if row[4] == PodState.PENDING)
            index.hidden[job.pk] = (engine_name, last)
        out.append(engine_job)
    return out


def _with_listed_pending(rows: list[PodRow], plan: backlog.Plan, columns: tuple[str, ...]) -> list[PodRow]:
    """``rows`` (no pending pod of a large queue) plus the pending pods the plan lists, in
    (job, index) order: every pending pod of a job listed whole, the first ones of a job cut."""
    pending = Pod.objects.filter(state=PodState.PENDING)
    whole = [pk for pk, n in plan.listed.items() if n >= plan.pending.get(pk, 0)]
    extra: list[PodRow] = []
    for part in bulk.id_slices(whole):
        extra.extend(pending.filter(bulk.AnyOf(F("job_id"), part)).values_list(*columns))  # type: ignore[arg-type]
    for pk, n in plan.listed.items():
        if n < plan.pending.get(pk, 0):
            extra.extend(pending.filter(job_id=pk).order_by("index").values_list(*columns)[:n])  # type: ignore[arg-type]
    if not extra:
        return rows
    return sorted([*rows, *extra], key=lambda row: (row[1], row[3]))


# (pk, job_id, name, index, state, node_id, reason) of a pod, as ``_jobs`` reads it.
PodRow = tuple[int, int, str, int, str, "int | None", str]


def _job_tasks(
    job: JobColumns,
    job_pods: list[PodRow],
    engine_name: str,
    namespace: str,
    used_tasks: set[str],
    devices: dict[int, list[int]],
    node_names: dict[int, str],
) -> tuple[list[scheduler.Task], dict[str, PodRef]]:
    tasks, refs = [], {}
    own_names = engine_name == job.name
    for pod_pk, _job_id, pod_name, pod_index, pod_state, node_id, reason in job_pods:
        task_name = pod_name if own_names else f"{engine_name}-{pod_index}"
        if task_name in used_tasks or task_name in refs:
            task_name = f"{task_name}-p{pod_pk}"
        node_name = node_names.get(node_id) if node_id is not None else None
        tasks.append(_row_task(pod_state, node_name, devices.get(pod_pk, ()), job, task_name, engine_name))
        refs[task_name] = PodRef(pod_pk, job.pk, pod_name, namespace, pod_state, node_id, reason)
    return tasks, refs


def _engine_job(
    job: JobColumns,
    name: str,
    namespace: str,
    tasks: list[scheduler.Task],
    now: datetime,
    more_pending: int = 0,
) -> scheduler.Job:
    explicit = {Preemptibility.PREEMPTIBLE: True, Preemptibility.NON_PREEMPTIBLE: False}
    selector, tolerations, required, preferred = _placement(job)
    return scheduler.Job(
        name=name,
        queue=job.queue_name,
        priority=job.priority,
        preemptible=explicit.get(job.preemptibility),  # type: ignore[call-overload]
        min_available=max(job.min_member, 1),
        created_s=_age(now, job.created_at) or 0.0,
        last_start_s=_age(now, job.started_at),
        tasks=tasks,
        namespace=namespace,
        pool=job.pool_name or DEFAULT_POOL,
        stale_s=_age(now, job.stale_since),
        last_eviction_s=_age(now, job.last_evicted_at),
        node_selector=selector,
        tolerations=tolerations,
        node_affinity=required,
        preferred_node_affinity=preferred,
        more_pending=more_pending,
    )


def _row_task(
    pod_state: str, node: str | None, devices: Iterable[int], job: JobColumns, name: str, job_name: str
) -> scheduler.Task:
    """A pod as an engine task, from its columns (state, node name, device indices)."""
    state = _ENGINE_STATE[pod_state]  # type: ignore[index]
    if node is None:
        state = scheduler.TaskState.PENDING  # its node is gone: it needs a new one
    pending = state == scheduler.TaskState.PENDING
    return scheduler.Task(
        name=name,
        job=job_name,
        gpu=job.gpu,
        gpu_memory_mib=job.gpu_memory_mib,
        gpu_fraction_devices=job.gpu_fraction_devices,
        cpu_millis=job.cpu_millis,
        memory_mib=job.memory_mib,
        state=state,
        node=None if pending else node,
        gpu_devices=() if pending else tuple(sorted(devices)),
    )


# --- In-memory modifications (what-if previews and fit checks; nothing is saved) -------------------


def with_queue_row(inp: CycleInput, row: Queue) -> CycleInput:
    """A copy of the cycle input in which one queue is replaced by an unsaved, modified row.

    Quotas, limits, weights, priority, min-runtimes and parent come from ``row``; the
    queue keeps its place in creation order. Nodes and jobs are copied too, so the
    engine may run on both inputs independently.
    """
    out = copy.deepcopy(inp)
    for position, queue in enumerate(out.snapshot.queues):
        if queue.name == row.name or out.index.queues.get(queue.name) == row.pk:
            engine = _engine_queue(row, queue.created_index)
            engine.historical_usage = queue.historical_usage
            out.snapshot.queues[position] = engine
    return out


def with_extra_job(inp: CycleInput, job: Job, now: datetime) -> tuple[CycleInput, str]:
    """A copy of the cycle input plus one unsaved job with ``task_count`` pending pods.

    Returns the copy and the job's engine name. Pods are named as ``submit`` would name
    them (``<job>-<i>``), so the engine's reason texts read as they will after submitting.
    """
    out = copy.deepcopy(inp)
    name = job.name
    while name in out.index.jobs or any(j.name == name for j in out.snapshot.jobs):
        name = f"{name}-new"
    namespace = job.namespace or job.queue.name
    columns = JobColumns.of(job)
    tasks = []
    for i in range(job.task_count):
        task_name = f"{job.name}-{i}" if name == job.name else f"{name}-{i}"
        while task_name in out.index.tasks:
            task_name = f"{task_name}-new"
        tasks.append(_row_task(PodState.PENDING, None, (), columns, task_name, name))
    out.snapshot.jobs.append(_engine_job(columns, name, namespace, tasks, now))
    return out, name


def alone_on_cluster(inp: CycleInput, job: scheduler.Job) -> scheduler.CycleResult:
    """The engine's cycle for ``job`` with nothing else on the cluster: can it ever be placed?

    Same nodes and queue tree; no other job (listed or not) and no historical usage, so only the
    job's own size, the nodes and the queue limits decide.
    """
    queues = [replace(q, historical_usage={}, unlisted=[]) for q in inp.snapshot.queues]
    alone = scheduler.Snapshot(nodes=inp.snapshot.nodes, queues=queues, jobs=[job])
    return scheduler.run_cycle(alone, inp.config)
