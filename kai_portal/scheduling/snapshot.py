"""Rows to engine: build the ``scheduler.Snapshot`` of one cycle from the database.

The only place that turns portal rows into engine data classes (the reverse
is ``scheduling/results.py``). One query per model; no model instance leaks
into the engine.

Here: the nodes and the queue tree, the order of the build, and the copies the previews make
(a queue changed, a job added, a job alone on the cluster). The jobs and their pods are read in
``snapshot_jobs.py``; ``snapshot_index.py`` keeps the rows behind each engine key.

The engine keys tasks and jobs by name, so keys must be unique in a snapshot.
A job keeps its own name as its key unless another job in the snapshot has it
too (two teams may both run ``train``); then its key is ``<name>-<pk>``.
``SnapshotIndex`` maps every engine key back to its row, and words the engine's
reasons with the cluster's own names (``SnapshotIndex.text``): a key never
reaches a text.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from django.conf import settings

import scheduler
from kai_portal.nodes.models import GpuDevice, Node
from kai_portal.queues.models import Queue
from kai_portal.scheduling import backlog, usage
from kai_portal.scheduling.engine import (
    TAINT_EFFECTS,
    Taint,
    gc_paused,
)
from kai_portal.scheduling.snapshot_index import (
    DEFAULT_POOL,
    CycleInput,
    SnapshotIndex,
    distinct,
    job_key,
    task_key,
)
from kai_portal.scheduling.snapshot_jobs import (
    JobColumns,
    Shard,
    as_text,
    engine_jobs,
    from_json,
    row_task,
    to_engine_job,
)
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Job

DEFAULT_GPU_MEMORY_MIB = 81920


def build_snapshot(now: datetime, pool: str | None = None) -> CycleInput:
    """The engine's view of the cluster at ``now``: queue tree, nodes, active jobs and their pods.

    With ``pool``, the view of that pool's shard only (a pool's cycle, issue 30): its nodes, the
    jobs the engine would place in it, and its queues' backlog and history. The engine still gets
    every queue (a few rows, read only) so that a job sent to this pool from another pool's queue
    is told so as the whole-cluster cycle tells it; the other pools' queues have no node and no
    job here, and nothing is written for them (``index.queues`` holds this pool's only)."""
    with gc_paused():
        return _build(now, pool)


def _build(now: datetime, pool: str | None = None) -> CycleInput:
    index = SnapshotIndex()
    nodes = _nodes(index, pool)
    queues = _queues(index, pool)
    mine = queues if pool is None else [q for q in queues if q.pool == pool]
    plan = backlog.plan(nodes, mine, index.queues, pool)
    jobs = engine_jobs(now, index, plan, _shard(pool, queues))
    _leave_out(mine, plan, index)
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
        for q in mine:
            q.historical_usage = history.get(q.name, {})
    return CycleInput(scheduler.Snapshot(nodes=nodes, queues=queues, jobs=jobs), config, index, pool)


def _shard(pool: str | None, queues: list[scheduler.Queue]) -> Shard | None:
    """Which jobs a pool's snapshot takes (None: every job, the whole cluster)."""
    if pool is None:
        return None
    return Shard(pool, {q.name: q.pool or DEFAULT_POOL for q in queues})


NODE_COLUMNS = ("pk", "name", "pool__name", "cpu_millicores", "memory_mib", "labels_text", "taints_text",
                "schedulable", "ready", "max_pods", "external_gpus", "external_cpu_millicores",
                "external_memory_mib", "external_pods")  # fmt: skip


def _nodes(index: SnapshotIndex, pool: str | None = None) -> list[scheduler.Node]:
    # Nodes and devices as columns (5,000 nodes and 40,000 devices at scale), devices in index
    # order per node.
    by_node: dict[int, list[tuple[int, int, int]]] = {}
    devices_of = GpuDevice.objects.all() if pool is None else GpuDevice.objects.filter(node__pool__name=pool)
    nodes_of = Node.objects.all() if pool is None else Node.objects.filter(pool__name=pool)
    for node_id, d_index, d_pk, d_memory in devices_of.order_by("node_id", "index").values_list(
        "node_id", "index", "pk", "memory_mib"
    ):
        by_node.setdefault(node_id, []).append((d_index, d_pk, d_memory))
    rows = nodes_of.annotate(labels_text=as_text("labels"), taints_text=as_text("taints")).values_list(
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
            labels={str(k): str(v) for k, v in (from_json(labels) or {}).items()},
            unschedulable=not (schedulable and ready),
            max_pods=int(max_pods),
            taints=_taints(from_json(taints)),
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


def _taints(raw: object) -> list[Taint]:
    """Node.taints rows ({key, value, effect}) as the engine's; a malformed entry is skipped
    (the cluster sync writes only valid ones; a hand-edited row must not stop the cycle)."""
    out = []
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, dict) and t.get("key") and t.get("effect") in TAINT_EFFECTS:
            out.append(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])))
    return out


def _seconds(value: object) -> float | None:
    return None if value is None else float(value.total_seconds())  # type: ignore[attr-defined]


def _queues(index: SnapshotIndex, pool: str | None = None) -> list[scheduler.Queue]:
    """Every queue as the engine's; ``index.queues`` (what a cycle writes for) only ``pool``'s."""
    rows = list(Queue.objects.select_related("parent", "node_pool").order_by("created_at", "pk"))
    out = []
    for position, row in enumerate(rows):
        if pool is None or row.node_pool.name == pool:
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


def _leave_out(queues: list[scheduler.Queue], plan: backlog.Plan, index: SnapshotIndex) -> None:
    """The pending requests of the jobs the plan left out go to their engine queue's ``unlisted``."""
    by_id = {index.queues[q.name]: q for q in queues}
    for queue_id, items in plan.left_out.items():
        queue = by_id[queue_id]
        queue.unlisted = [(task, count) for _pk, task, count in items]
        text = backlog.not_considered_text(queue.name, queue.pool or DEFAULT_POOL)
        index.left_out[queue_id] = (text, [pk for pk, _task, _count in items])


# (pk, job_id, name, index, state, node_id, reason) of a pod, as ``engine_jobs`` reads it.


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

    Returns the copy and the job's engine key. The job and its pods are named as ``submit``
    would name them (the job's name, ``<job>-<i>``), so the engine's reason texts read as they
    will after submitting (``index.text``), whatever else is called the same.
    """
    out = copy.deepcopy(inp)
    namespace = job.namespace or job.queue.name
    # A draft beside a job of its name (one that ended, still releasing, or one in the cluster)
    # is a job of its own: it has no row id, so it is ``#draft``.
    key = distinct(job_key(namespace, job.queue.name, job.name), "draft", out.index.jobs)
    out.index.drafts[key] = job.name
    columns = JobColumns.of(job)
    tasks = []
    for i in range(job.task_count):
        name = f"{job.name}-{i}"
        tasks.append(row_task(PodState.PENDING, None, (), columns, name, key, task_key(key, name)))
        out.index.drafts[tasks[-1].key] = name
    out.snapshot.jobs.append(to_engine_job(columns, key, namespace, tasks, now))
    return out, key


def alone_on_cluster(inp: CycleInput, job: scheduler.Job) -> scheduler.CycleResult:
    """The engine's cycle for ``job`` with nothing else on the cluster: can it ever be placed?

    Same nodes and queue tree; no other job (listed or not) and no historical usage, so only the
    job's own size, the nodes and the queue limits decide.
    """
    queues = [replace(q, historical_usage={}, unlisted=[]) for q in inp.snapshot.queues]
    alone = scheduler.Snapshot(nodes=inp.snapshot.nodes, queues=queues, jobs=[job])
    return scheduler.run_cycle(alone, inp.config)
