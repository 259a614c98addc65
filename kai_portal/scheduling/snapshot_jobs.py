"""Rows to engine jobs and tasks: the active jobs' columns, their pods, and their placement rules.

Part of building a cycle's snapshot (``snapshot.py``). One query for the jobs' columns and one
for their pods; a job whose row cannot be converted is left out and named in
``SnapshotIndex.unhandled`` (the cycle fails it), so one bad row never stops scheduling.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast

import scheduler
from kai_portal.core import bulk
from kai_portal.scheduling import backlog
from kai_portal.scheduling.engine import (
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    MatchExpression,
    PreferredTerm,
    Toleration,
)
from kai_portal.scheduling.snapshot_index import (
    DEFAULT_POOL,
    JobRef,
    PodRef,
    SnapshotIndex,
    distinct,
    job_key,
    task_key,
)
from kai_portal.workloads.choices import JobState, PodState, Preemptibility
from kai_portal.workloads.manifest_values import NODE_POOL_LABEL
from kai_portal.workloads.models import Job, Pod

PodRow = tuple[int, int, str, int, str, "int | None", str]

_EMPTY_JSON: dict[str, Callable[[], object]] = {"{}": dict, "[]": list, "null": lambda: None}

_ENGINE_STATE = {
    PodState.PENDING: scheduler.TaskState.PENDING,
    # The engine has no Bound: a bound pod holds its node and is charged like a running one.
    PodState.BOUND: scheduler.TaskState.RUNNING,
    PodState.RUNNING: scheduler.TaskState.RUNNING,
    PodState.RELEASING: scheduler.TaskState.RELEASING,
}


def as_text(field: str) -> Cast:
    """A JSON column read as its text, so the common empty ``{}`` / ``[]`` needs no parsing."""
    return Cast(field, output_field=TextField())


def from_json(text: str | None) -> Any:
    """A JSON column's value from its text (see ``as_text``)."""
    if text is None:
        return None
    empty = _EMPTY_JSON.get(text)
    return empty() if empty is not None else json.loads(text)


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
    pod_group_name: str  # the arrival tie-break (KAI's PodGroup name); "" outside a cluster
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
            job.pod_group_name, job.node_selector, job.tolerations, job.node_affinity,
            *_task_shape(job.gpu_fraction, job.gpu_count, job.gpu_memory_mib, job.gpu_fraction_devices,
                         job.cpu_millicores, job.memory_mib),
        )  # fmt: skip


JOB_COLUMNS = ("pk", "name", "namespace", "queue_id", "queue__name", "node_pool__name", "message", "priority",
               "preemptibility", "min_member", "created_at", "started_at", "stale_since", "last_evicted_at",
               "pod_group_name", "selector_text", "tolerations_text", "affinity_text", "gpu_fraction",
               "gpu_count", "gpu_memory_mib", "gpu_fraction_devices", "cpu_millicores",
               "memory_mib")  # fmt: skip


def _task_shape(
    fraction: object, count: object, gpu_memory: object, devices: object, cpu: object, memory: object
) -> tuple[float, float, int, float, float]:
    """What each task of a job asks for, as the engine's numbers (fraction wins over count)."""
    gpu = float(fraction) if fraction is not None else float(count)  # type: ignore[arg-type]
    return gpu, float(gpu_memory or 0), int(devices or 1), float(cpu), float(memory)  # type: ignore[arg-type, call-overload]


def job_columns(job_ids: list[int], unhandled: dict[int, str]) -> dict[int, JobColumns]:
    """The rows of these jobs as ``JobColumns``; a row that does not convert is left out and
    what was wrong recorded in ``unhandled``."""
    out: dict[int, JobColumns] = {}
    jobs = Job.objects.annotate(
        selector_text=as_text("node_selector"), tolerations_text=as_text("tolerations"),
        affinity_text=as_text("node_affinity"),
    )  # fmt: skip
    for part in bulk.id_slices(job_ids):
        for row in jobs.filter(bulk.AnyOf(F("pk"), part)).values_list(*JOB_COLUMNS):
            try:
                out[row[0]] = JobColumns(  # type: ignore[call-arg]  # (the columns in JOB_COLUMNS' order)
                    *row[:15],
                    from_json(row[15]),
                    from_json(row[16]),
                    from_json(row[17]),
                    *_task_shape(*row[18:]),
                )
            except (ArithmeticError, ValueError, TypeError) as error:  # JSONDecodeError is a ValueError
                unhandled[row[0]] = f"{type(error).__name__}: {str(error)[:200]}"
    return out


@dataclass(frozen=True, slots=True)
class Shard:
    """A pool's cycle's share of the jobs: those the engine would place in ``pool``.

    As ``scheduler.pools.assign_pools`` decides: a job whose pods hold nodes belongs to their
    nodes' pool, else to the pool its node-pool selector names, else to its queue's pool
    (``queue_pools``: every queue's)."""

    pool: str
    queue_pools: dict[str, str]

    def rows(self) -> QuerySet[Job, dict[str, Any]]:
        """The jobs that may be this pool's (a superset, narrowed by ``takes``), as a subquery."""
        on_its_nodes = Pod.objects.filter(job=OuterRef("pk"), node__pool__name=self.pool, state__in=HOLDING)
        return (
            # Any selector naming a node pool (its text, not a JSON path: the same SQL on both
            # databases); ``takes`` reads which pool.
            Job.objects.annotate(selector_text=as_text("node_selector"))
            .filter(
                Q(queue__node_pool__name=self.pool)
                | Q(selector_text__contains=f'"{POOL_SELECTOR}"')
                | Exists(on_its_nodes)
            )
            .values("pk")
        )

    def takes(self, job: JobColumns, pods: list[PodRow], nodes: dict[int, str]) -> bool:
        """Whether the job is this pool's. A job with a pod on another pool's node is not (nor,
        when its pods are split over two pools after a node was relabelled, that pool's: see
        docs/decisions/shards.md); its pods are never taken for pending and placed again."""
        holding = [row for row in pods if row[5] is not None and row[4] in HOLDING]
        if holding:
            return all(row[5] in nodes for row in holding)
        selector = job.node_selector.get(POOL_SELECTOR) if isinstance(job.node_selector, dict) else None
        target = selector or self.queue_pools.get(job.queue_name, job.pool_name or DEFAULT_POOL)
        return bool(target == self.pool)


POOL_SELECTOR = NODE_POOL_LABEL  # KAI's node-pool label, as the engine reads it from a job's selector
HOLDING = (PodState.BOUND, PodState.RUNNING, PodState.RELEASING)


def engine_jobs(
    now: datetime, index: SnapshotIndex, plan: backlog.Plan | None = None, shard: Shard | None = None
) -> list[scheduler.Job]:
    """Active jobs with their alive pods, plus releasing pods of ended jobs (they still hold nodes).

    Pods, their devices and job rows are read as plain columns, in one pass over the pods (at
    50,000 pods, model instances per pod or per job dominated the cycle). A job that cannot be
    converted (a value out of range) is left out and recorded in ``index.unhandled``: one bad
    row never stops the cycle for everyone else."""
    pods = Pod.objects.filter(state__in=list(_ENGINE_STATE)).exclude(
        state=PodState.PENDING, job__state__in=[s for s in JobState.values if s not in JobState.active()]
    )
    if shard is not None:
        pods = pods.filter(job_id__in=shard.rows())
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
    job_rows = job_columns(list(by_job), index.unhandled)
    out = []
    for job_id, job_pods in by_job.items():
        job = job_rows.get(job_id)
        if job is None:
            continue  # its row did not convert: in ``index.unhandled``
        if shard is not None and not shard.takes(job, job_pods, node_names):
            continue  # another pool's job (its pods' nodes, or the pool it asks for)
        namespace = job.namespace or job.queue_name
        key = distinct(job_key(namespace, job.queue_name, job.name), job.pk, index.jobs)
        listed = plan.truncated(job_id) if plan is not None else None
        more = plan.pending[job_id] - listed if listed is not None and plan is not None else 0
        try:
            tasks, refs = _job_tasks(job, job_pods, key, namespace, devices, node_names)
            engine_job = to_engine_job(job, key, namespace, tasks, now, more_pending=more)
        except (ArithmeticError, ValueError, TypeError, KeyError) as error:
            index.unhandled[job.pk] = f"{type(error).__name__}: {str(error)[:200]}"
            continue
        index.jobs[key] = JobRef(job.pk, job.name, namespace, job.queue_id, job.message)
        index.tasks.update(refs)
        if more:
            last = max(row[3] for row in job_pods if row[4] == PodState.PENDING)
            index.hidden[job.pk] = (key, last)
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


def _job_tasks(
    job: JobColumns,
    job_pods: list[PodRow],
    key: str,
    namespace: str,
    devices: dict[int, list[int]],
    node_names: dict[int, str],
) -> tuple[list[scheduler.Task], dict[str, PodRef]]:
    """The job's pods as engine tasks, each named as its pod and keyed under the job's (unique)
    key, and the rows behind them by task key."""
    tasks: list[scheduler.Task] = []
    refs: dict[str, PodRef] = {}
    for pod_pk, _job_id, pod_name, _pod_index, pod_state, node_id, reason in job_pods:
        pod_key = distinct(task_key(key, pod_name), pod_pk, refs)
        node_name = node_names.get(node_id) if node_id is not None else None
        tasks.append(row_task(pod_state, node_name, devices.get(pod_pk, ()), job, pod_name, key, pod_key))
        refs[pod_key] = PodRef(pod_pk, job.pk, pod_name, namespace, pod_state, node_id, reason)
    return tasks, refs


def to_engine_job(
    job: JobColumns,
    key: str,
    namespace: str,
    tasks: list[scheduler.Task],
    now: datetime,
    more_pending: int = 0,
) -> scheduler.Job:
    """The job's row as an engine job: named as the job is, keyed ``key`` (``job_key``)."""
    explicit = {Preemptibility.PREEMPTIBLE: True, Preemptibility.NON_PREEMPTIBLE: False}
    selector, tolerations, required, preferred = _placement(job)
    return scheduler.Job(
        name=job.name,
        key=key,
        queue=job.queue_name,
        priority=job.priority,
        preemptible=explicit.get(job.preemptibility),  # type: ignore[call-overload]
        min_available=max(job.min_member, 1),
        # Signed: a cluster's creationTimestamp may be ahead of this worker's clock, and ages
        # clamped to 0 would turn arrival order into name order.
        created_s=(now - job.created_at).total_seconds() if job.created_at is not None else 0.0,
        arrival_tiebreak=job.pod_group_name,
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


def row_task(
    pod_state: str,
    node: str | None,
    devices: Iterable[int],
    job: JobColumns,
    name: str,
    owner: str,
    key: str,
) -> scheduler.Task:
    """A pod as an engine task, from its columns (state, node name, device indices): named
    ``name`` (the pod's), keyed ``key`` (``task_key``), of the job keyed ``owner``."""
    state = _ENGINE_STATE[pod_state]  # type: ignore[index]
    if node is None:
        state = scheduler.TaskState.PENDING  # its node is gone: it needs a new one
    pending = state == scheduler.TaskState.PENDING
    return scheduler.Task(
        name=name,
        key=key,
        job=owner,
        gpu=job.gpu,
        gpu_memory_mib=job.gpu_memory_mib,
        gpu_fraction_devices=job.gpu_fraction_devices,
        cpu_millis=job.cpu_millis,
        memory_mib=job.memory_mib,
        state=state,
        node=None if pending else node,
        gpu_devices=() if pending else tuple(sorted(devices)),
    )
