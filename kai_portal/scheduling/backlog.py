"""What of a large pending backlog one cycle looks at (issue 26).

60 jobs of 10,000 tasks from one member made every cycle hit Celery's hard limit: the snapshot,
the engine, the decisions and the forecast all went task by task through work no cycle could
place. A queue whose backlog is small (at most ``CYCLE_QUEUE_DEPTH`` pending jobs and
``CYCLE_QUEUE_TASKS`` pending tasks) is given to the engine whole, exactly as before. For a
queue past either, this module plans what the engine gets:

* **jobs**, in KAI's job order (priority, elastic state, age, name; kai-semantics §4.2): a job is
  considered while fewer than ``CYCLE_QUEUE_DEPTH`` jobs and ``CYCLE_QUEUE_TASKS`` listed tasks
  are ahead of it, or while what the jobs ahead need to start (their next step) still leaves room
  for its own next step in the pool's capacity and the queue's limits. Past that, the jobs ahead
  would have to fail for it to start, so it waits: its job message and its pending pods say it
  was not considered (KAI's ``queueDepthPerAction`` cuts a queue at a fixed depth; this one never
  cuts jobs that could all start in this cycle);
* **tasks** of each job considered: every task the pool could hold plus one (so the engine's
  decisions and its first failing task are those of the whole job), and at least the gang
  minimum; the rest are the engine job's ``more_pending``, counted in the queue's request.

The pending requests of jobs left out go to the engine queue's ``unlisted`` (counted in its
request too), so fair shares are those of the whole backlog.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, F

import scheduler
from kai_portal.core import bulk
from kai_portal.history.models import JobMessage
from kai_portal.scheduling.engine import DEFAULT_POD_TEXT, queue_pools
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod

NOT_CONSIDERED = "NotConsidered"

LIGHT_COLUMNS = ("pk", "queue_id", "name", "priority", "created_at", "min_member", "gpu_fraction",
                 "gpu_count", "gpu_memory_mib", "gpu_fraction_devices", "cpu_millicores",
                 "memory_mib", "pod_group_name")  # fmt: skip


Row = tuple[Any, ...]  # a job's LIGHT_COLUMNS


@dataclass
class Plan:
    """What the snapshot lists of the large queues' backlogs (nothing: every pod is listed)."""

    heavy_queues: set[int] = field(default_factory=set)
    # Jobs of the large queues that are listed, with how many of their pending pods (all of them
    # when not truncated); pods past that count are ``more_pending``.
    listed: dict[int, int] = field(default_factory=dict)
    pending: dict[int, int] = field(default_factory=dict)  # every pending count read (job id -> pods)
    # Jobs left out, per queue id, with a task like theirs for the queue's ``unlisted``.
    left_out: dict[int, list[tuple[int, scheduler.Task, int]]] = field(default_factory=dict)

    def truncated(self, job_id: int) -> int | None:
        """The pending pods listed of a job whose backlog is cut, else None."""
        listed = self.listed.get(job_id)
        return listed if listed is not None and listed < self.pending.get(job_id, 0) else None


def not_considered_text(queue: str, pool: str) -> str:
    """The reason of a job (and its pending pods) left out of a cycle."""
    return (
        f"{NOT_CONSIDERED}: queue '{queue}' has more pending work ahead of this job than node pool "
        f"'{pool}' can take in one cycle, so this cycle did not consider it; it is considered once "
        "the jobs ahead of it start, finish or are cancelled (job order: priority, then age)."
    )


def plan(
    nodes: list[scheduler.Node],
    queues: list[scheduler.Queue],
    queue_ids: Mapping[str, int],
    pool: str | None = None,
) -> Plan:
    """Read the pending counts per job and plan the large queues' backlogs (see the module).

    With ``pool`` (a pool's cycle), the pending pods of that pool's queues only."""
    out = Plan()
    depth, task_budget = settings.CYCLE_QUEUE_DEPTH, settings.CYCLE_QUEUE_TASKS
    pending = Pod.objects.filter(state=PodState.PENDING, job__state__in=JobState.active())
    if pool is not None:
        pending = pending.filter(job__queue__node_pool__name=pool)
    counts = pending.values_list("job_id", "job__queue_id").annotate(n=Count("pk")).order_by()
    per_queue: dict[int, list[int]] = {}  # queue id -> [jobs, tasks]
    for job_id, queue_id, n in counts:
        out.pending[job_id] = n
        acc = per_queue.setdefault(queue_id, [0, 0])
        acc[0] += 1
        acc[1] += n
    out.heavy_queues = {q for q, (jobs, tasks) in per_queue.items() if jobs > depth or tasks > task_budget}
    if not out.heavy_queues:
        return out
    rooms = _rooms(nodes, queues)
    names = {pk: name for name, pk in queue_ids.items()}
    heavy_jobs = Job.objects.filter(queue_id__in=out.heavy_queues, state__in=JobState.active())
    jobs = list(heavy_jobs.values_list(*LIGHT_COLUMNS))
    jobs = [row for row in jobs if out.pending.get(row[0])]
    # Bound or running pods of those jobs (their elastic state is part of the job order).
    active: dict[int, int] = {}
    for part in bulk.id_slices([row[0] for row in jobs]):
        held = Pod.objects.filter(bulk.AnyOf(F("job_id"), part), state__in=[PodState.BOUND, PodState.RUNNING])
        active.update(held.values_list("job_id").annotate(n=Count("pk")).order_by())
    by_queue: dict[int, list[Row]] = {}
    for row in jobs:
        by_queue.setdefault(row[1], []).append(row)
    for queue_id, rows in by_queue.items():
        name = names.get(queue_id)
        if name is None:
            continue  # a queue the snapshot does not have: the engine says so for each job
        rows.sort(key=lambda r: _job_order(r, active.get(r[0], 0)))
        _plan_queue(out, rows, rooms[name], active, depth, task_budget)
    return out


def _job_order(row: Row, active: int) -> tuple[object, ...]:
    """KAI's job order inside a queue (``scheduler.ordering.job_key``) from a job's columns."""
    pk, _queue, name, priority, created_at, min_member = row[:6]
    gang_min = max(int(min_member), 1)
    elastic = 0 if active < gang_min else (1 if active == gang_min else 2)
    return (-priority, elastic, created_at or datetime.max.replace(tzinfo=UTC), row[12], name, pk)


def _shape(row: Row) -> tuple[float, float, int, float, float]:
    fraction, count, gpu_memory, devices, cpu, memory = row[6:12]
    gpu = float(fraction) if fraction is not None else float(count or 0)
    return gpu, float(gpu_memory or 0), int(devices or 1), float(cpu or 0), float(memory or 0)


def _plan_queue(
    out: Plan,
    rows: list[Row],
    room: Room,
    active: Mapping[int, int],
    depth: int,
    task_budget: int,
) -> None:
    capacity, pods_room = room
    ahead = {"gpu": 0.0, "cpu": 0.0, "memory": 0.0, "pods": 0.0}  # next steps of the jobs considered
    considered = listed_tasks = 0
    for row in rows:
        pk = row[0]
        pending = out.pending[pk]
        gpu, gpu_memory, devices, cpu, memory = _shape(row)
        # GPU-memory requests are left out of the GPU sums: their GPU share depends on the node.
        ask = {"gpu": gpu, "cpu": cpu, "memory": memory, "pods": 1.0}
        room_of = {**capacity, "pods": pods_room}
        gang_min = max(int(row[5]), 1)
        step = max(gang_min - active.get(pk, 0), 1)
        # Tasks the pool (and the queue's limits) could hold at most: one more shows the first failure.
        fits = min((math.floor(room_of[r] / v) for r, v in ask.items() if v > 0), default=pending)
        listed = min(pending, max(gang_min, fits + 1))
        within_depth = considered < depth and listed_tasks + listed <= task_budget
        room_left = all(ahead[r] + step * v <= room_of[r] for r, v in ask.items() if v > 0)
        if considered == 0 or within_depth or room_left:
            out.listed[pk] = listed
            considered += 1
            listed_tasks += listed
            for r, v in ask.items():
                ahead[r] += step * v
            continue
        task = scheduler.Task(name=f"unlisted-{pk}", gpu=gpu, gpu_memory_mib=gpu_memory,
                              gpu_fraction_devices=devices, cpu_millis=cpu, memory_mib=memory)  # fmt: skip
        out.left_out.setdefault(row[1], []).append((pk, task, pending))


Room = tuple[dict[str, float], float]  # per resource, and in pods


def _rooms(nodes: list[scheduler.Node], queues: list[scheduler.Queue]) -> dict[str, Room]:
    """Per queue: the most its jobs could hold after one cycle, per resource (the pool's capacity
    on schedulable nodes, capped by the limits of the queue and its ancestors) and in pods."""
    capacity: dict[str, dict[str, float]] = {}
    pods: dict[str, float] = {}
    for n in nodes:
        if n.unschedulable:
            continue
        cap = capacity.setdefault(n.pool, {"gpu": 0.0, "cpu": 0.0, "memory": 0.0})
        cap["gpu"] += max(0, n.gpus - n.external.gpus)
        cap["cpu"] += max(0.0, n.cpu_millis - n.external.cpu_millis)
        cap["memory"] += max(0.0, n.memory_mib - n.external.memory_mib)
        pods[n.pool] = pods.get(n.pool, 0.0) + max(0, n.max_pods - n.external.pods)
    pool_of = queue_pools(queues)
    by_name = {q.name: q for q in queues}
    out: dict[str, Room] = {}
    for q in queues:
        pool = pool_of[q.name]
        room = dict(capacity.get(pool, {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}))
        node: scheduler.Queue | None = q
        seen: set[str] = set()
        while node is not None and node.name not in seen:
            seen.add(node.name)
            for r in room:
                limit = node.res(r).limit
                if limit >= 0:
                    room[r] = min(room[r], limit)
            node = by_name.get(node.parent) if node.parent else None
        out[q.name] = (room, pods.get(pool, 0.0))
    return out


def persist_backlog(
    cycle_id: int,
    hidden: Mapping[int, tuple[str, int]],
    left_out: Mapping[int, tuple[str, list[int]]],
    job_messages: Mapping[str, str],
    now: datetime,
) -> set[int]:
    """Write the reasons of the pods and jobs the snapshot did not list, only where they changed
    (a statement per cut job and per queue, never a row per pod). Returns the ids of the jobs
    left out: their message is this module's, not the engine's. Call in the cycle's transaction.

    A pod past a cut (``hidden``) gets what the engine gives every pending pod of its job without
    a fit error of its own: the job's message, else KAI's default text. Neither gets a Decision
    row (the job's message, kept as a JobMessage when it changes, says it for all of them)."""
    for job_id, (key, last_listed) in hidden.items():
        text = job_messages.get(key) or DEFAULT_POD_TEXT
        Pod.objects.filter(job_id=job_id, state=PodState.PENDING, index__gt=last_listed).exclude(
            reason=text
        ).update(reason=text, reason_at=now)
    left: set[int] = set()
    for text, job_ids in left_out.values():
        left.update(job_ids)
        for part in bulk.id_slices(job_ids):
            jobs = Job.objects.filter(bulk.AnyOf(F("pk"), part), state__in=JobState.active())
            changed = list(jobs.exclude(message=text).values_list("pk", flat=True))
            if changed:
                Job.objects.filter(bulk.AnyOf(F("pk"), changed)).update(message=text)
                bulk.insert_rows(
                    JobMessage,
                    ("cycle_id", "job_id", "reason", "message"),
                    [(cycle_id, pk, NOT_CONSIDERED, text) for pk in changed],
                )
            Pod.objects.filter(bulk.AnyOf(F("job_id"), part), state=PodState.PENDING).exclude(
                reason=text
            ).update(reason=text, reason_at=now)
    return left
