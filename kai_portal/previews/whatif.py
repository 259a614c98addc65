"""What-if before applying a quota change: the next cycle with the changed tree, compared with today's.

``preview_queue_change(queue, changes, now)`` validates the change on an unsaved
copy of the queue (``Queue.clean()``: the tree rules), builds the cycle input
exactly as the scheduling loop does (``snapshot.build_snapshot``), replaces the
queue by the changed copy, and runs the engine twice on the same snapshot: once
unchanged, once changed. It reports:

* **queues**: deserved (quota) and fair share per resource, before -> after, of the
  changed queue, its ancestors, siblings and descendants (old and new parent),
  and of every other queue whose numbers change;
* **would_start**: pending jobs the changed cycle places (Allocated = bound now,
  Pipelined = starts once the jobs it evicts have left), each marked with
  whether it would also start without the change;
* **would_be_evicted**: running jobs the changed cycle evicts (reclaim, preempt,
  consolidation), with the engine's message and the job they make room for;
* **reclaimable**: running jobs that the change exposes to reclaim even if no
  queue claims them in the next cycle. Definition (KAI's fair-share reclaim
  filter, kai-semantics §3.7, applied at the leaf): a job is reclaimable when it
  is preemptible and its leaf queue's allocation exceeds the queue's
  *allocatable share* ``max(deserved, fair share)`` (capped at the limit) in some
  resource. Only as many jobs are listed as it takes to bring the queue down to
  that share, taken in victim order (§4.4, within a queue): lowest job priority
  first, then the most recently started, then the newest;
* **warnings**: a quota or limit set below what the queue (with its subtree)
  uses now, with the amount. A lowered limit evicts nothing (KAI never evicts for
  a limit) but blocks new jobs until usage falls below it; a lowered quota makes
  the part above it reclaimable by queues below their share.

Nothing is written to the database: the queue copy is never saved.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError

from kai_portal.core.units import RESOURCES, UNLIMITED, format_amount
from kai_portal.queues.models import Queue
from kai_portal.scheduling import engine
from kai_portal.scheduling.snapshot import build_snapshot, with_queue_row
from kai_portal.scheduling.snapshot_index import CycleInput
from kai_portal.workloads.models import Job

# The queue fields a preview may change (the same names as the API's PATCH body).
PREVIEW_FIELDS = (
    "parent",
    "priority",
    *(f"{r}_{kind}" for r in RESOURCES for kind in ("quota", "limit", "over_quota_weight")),
    "preempt_min_runtime",
    "reclaim_min_runtime",
)
RESOURCE_LABELS = {"gpu": "GPU", "cpu": "CPU", "memory": "Memory"}
EPS = 1e-6


@dataclass
class ShareChange:
    """One queue's deserved and fair share of one resource, before -> after."""

    resource: str
    deserved_before: float
    deserved_after: float
    fair_share_before: float
    fair_share_after: float
    allocated: float

    @property
    def changed(self) -> bool:
        return (
            abs(self.deserved_before - self.deserved_after) > EPS
            or abs(self.fair_share_before - self.fair_share_after) > EPS
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "deserved_before": self.deserved_before,
            "deserved_after": self.deserved_after,
            "fair_share_before": self.fair_share_before,
            "fair_share_after": self.fair_share_after,
            "allocated": self.allocated,
        }


@dataclass
class QueueImpact:
    queue: str
    relation: str  # changed | ancestor | sibling | descendant | other
    shares: list[ShareChange]

    @property
    def changed(self) -> bool:
        return any(s.changed for s in self.shares)

    def share(self, resource: str) -> ShareChange:
        return next(s for s in self.shares if s.resource == resource)


@dataclass
class JobImpact:
    """A job the preview names: it would start, be evicted, or become reclaimable."""

    name: str
    uid: str
    queue: str
    tasks: int
    gpus: float
    how: str = ""  # start: allocated | pipelined; eviction: reclaim | preempt | consolidation | ...
    message: str = ""
    evictor_job: str | None = None
    evictor_queue: str | None = None
    without_change: bool = False  # the unchanged cycle does the same to this job


@dataclass
class UsageWarning:
    resource: str
    kind: str  # quota | limit
    value: float
    allocated: float
    text: str


@dataclass
class QueuePreview:
    queue: str
    now: datetime
    errors: dict[str, list[str]] = field(default_factory=dict)
    changes: list[tuple[str, str, str]] = field(default_factory=list)  # field, old, new
    queues: list[QueueImpact] = field(default_factory=list)
    would_start: list[JobImpact] = field(default_factory=list)
    would_be_evicted: list[JobImpact] = field(default_factory=list)
    reclaimable: list[JobImpact] = field(default_factory=list)
    warnings: list[UsageWarning] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def resources_shown(self) -> list[str]:
        """GPU always; CPU and memory only when some number of theirs changes."""
        return [r for r in RESOURCES if r == "gpu" or any(q.share(r).changed for q in self.queues)]


def preview_queue_change(queue: Queue, changes: Mapping[str, Any], now: datetime) -> QueuePreview:
    """What the next cycle would do if ``changes`` were saved on ``queue``; saves nothing.

    ``changes`` maps field names (``PREVIEW_FIELDS``; others are ignored) to new
    values in model units; ``parent`` is a ``Queue`` or None. Validation errors of
    the changed queue are returned in ``errors`` and nothing is computed.
    """
    preview = QueuePreview(queue=queue.name, now=now)
    row = Queue.objects.select_related("parent").get(pk=queue.pk)
    old = {name: getattr(row, name) for name in PREVIEW_FIELDS}
    for name, value in changes.items():
        if name in PREVIEW_FIELDS:
            setattr(row, name, value)
    try:
        row.full_clean()
    except ValidationError as exc:
        preview.errors = exc.message_dict
        return preview
    preview.changes = [
        (name, _text(old[name]), _text(getattr(row, name)))
        for name in PREVIEW_FIELDS
        if _text(old[name]) != _text(getattr(row, name))
    ]

    before_input = build_snapshot(now)
    after_input = with_queue_row(before_input, row)
    before = engine.run_cycle(_copy(before_input).snapshot, before_input.config)
    after = engine.run_cycle(_copy(after_input).snapshot, after_input.config)

    allocated = _allocated(after_input)
    preview.queues = _queue_impacts(before_input, after_input, before, after, allocated, row.name)
    jobs = _job_rows(before_input)
    preview.would_start = _starts(after_input, after, before, jobs)
    preview.would_be_evicted = _evicted(after_input, after, before, jobs)
    preview.reclaimable = _reclaimable(after_input, after, allocated, jobs)
    preview.warnings = _warnings(row, allocated.get(row.name, {}))
    return preview


# --- helpers ---------------------------------------------------------------------------------------


def _copy(inp: CycleInput) -> CycleInput:
    """The engine may mark up its input; each run gets its own copy."""
    return copy.deepcopy(inp)


def _text(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, Queue):
        return value.name
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return str(value)


def _charge(task: engine.Task, nodes: dict[str, engine.Node]) -> dict[str, float]:
    gpu = task.gpu
    if gpu == 0 and task.gpu_memory_mib > 0 and task.node in nodes:
        gpu = task.gpu_memory_mib / max(nodes[task.node].gpu_memory_mib, 1.0)
    return {"gpu": gpu, "cpu": task.cpu_millis, "memory": task.memory_mib}


def _allocated(inp: CycleInput) -> dict[str, dict[str, float]]:
    """What each queue (with its subtree) holds now: running tasks, as the engine charges them."""
    parents = {q.name: q.parent for q in inp.snapshot.queues}
    nodes = {n.name: n for n in inp.snapshot.nodes}
    out: dict[str, dict[str, float]] = {q.name: dict.fromkeys(RESOURCES, 0.0) for q in inp.snapshot.queues}
    for job in inp.snapshot.jobs:
        for task in job.tasks:
            if task.state != engine.TaskState.RUNNING:
                continue
            charge = _charge(task, nodes)
            name: str | None = job.queue
            seen: set[str] = set()
            while name is not None and name in out and name not in seen:
                seen.add(name)
                for r in RESOURCES:
                    out[name][r] = round(out[name][r] + charge[r], 6)
                name = parents.get(name)
    return out


def _related(inp: CycleInput, name: str) -> dict[str, str]:
    """Relation of each queue to ``name`` in this tree: ancestors, siblings, descendants."""
    parents = {q.name: q.parent for q in inp.snapshot.queues}
    out = {name: "changed"}
    node, seen = parents.get(name), {name}
    while node is not None and node not in seen:
        seen.add(node)
        out.setdefault(node, "ancestor")
        node = parents.get(node)
    for q, parent in parents.items():
        if q != name and parent == parents.get(name):
            out.setdefault(q, "sibling")
    frontier = [name]
    while frontier:
        current = frontier.pop()
        for q, parent in parents.items():
            if parent == current and q not in out:
                out[q] = "descendant"
                frontier.append(q)
    return out


def _queue_impacts(
    before_input: CycleInput,
    after_input: CycleInput,
    before: engine.CycleResult,
    after: engine.CycleResult,
    allocated: dict[str, dict[str, float]],
    name: str,
) -> list[QueueImpact]:
    related = {**_related(before_input, name), **_related(after_input, name)}
    impacts = []
    for q in after_input.snapshot.queues:
        b, a = before.queues.get(q.name), after.queues.get(q.name)
        if a is None or b is None:
            continue
        shares = [
            ShareChange(
                resource=r,
                deserved_before=b.deserved.get(r, 0.0),
                deserved_after=a.deserved.get(r, 0.0),
                fair_share_before=b.fair_share.get(r, 0.0),
                fair_share_after=a.fair_share.get(r, 0.0),
                allocated=allocated.get(q.name, {}).get(r, 0.0),
            )
            for r in RESOURCES
        ]
        impact = QueueImpact(q.name, related.get(q.name, "other"), shares)
        if impact.relation != "other" or impact.changed:
            impacts.append(impact)
    return impacts


def _job_rows(inp: CycleInput) -> dict[str, Job]:
    """The job rows of the snapshot, by engine key."""
    ids = {ref.job_id for ref in inp.index.jobs.values()}
    rows = {j.pk: j for j in Job.objects.filter(pk__in=ids).select_related("queue")}
    return {key: rows[ref.job_id] for key, ref in inp.index.jobs.items() if ref.job_id in rows}


def _impact(engine_job: engine.Job, row: Job | None, tasks: int, **fields: Any) -> JobImpact:
    gpu = sum(t.gpu for t in engine_job.tasks[:tasks]) if tasks else 0.0
    return JobImpact(
        name=row.name if row else engine_job.name,
        uid=str(row.uid) if row else "",
        queue=engine_job.queue,
        tasks=tasks,
        gpus=round(gpu, 2),
        **fields,
    )


def _placed(result: engine.CycleResult, job: engine.Job) -> tuple[int, str]:
    """How many pending tasks of the job the cycle placed, and how (allocated or pipelined)."""
    placed = [
        result.tasks[t.key].status
        for t in job.tasks
        if t.state == engine.TaskState.PENDING
        and t.key in result.tasks
        and result.tasks[t.key].status in (engine.TaskState.ALLOCATED, engine.TaskState.PIPELINED)
    ]
    how = "pipelined" if engine.TaskState.PIPELINED in placed else "allocated"
    return len(placed), how


def _starts(
    inp: CycleInput, after: engine.CycleResult, before: engine.CycleResult, rows: dict[str, Job]
) -> list[JobImpact]:
    out = []
    for job in inp.snapshot.jobs:
        count, how = _placed(after, job)
        if count:
            also, _ = _placed(before, job)
            out.append(_impact(job, rows.get(job.key), count, how=how, without_change=also > 0))
    return out


def _evicted_jobs(result: engine.CycleResult) -> dict[str, list[engine.Eviction]]:
    out: dict[str, list[engine.Eviction]] = {}
    for e in result.evictions:
        if e.moved_to is None:  # re-placed elsewhere (consolidation) is not a loss
            out.setdefault(e.job, []).append(e)
    return out


def _evicted(
    inp: CycleInput, after: engine.CycleResult, before: engine.CycleResult, rows: dict[str, Job]
) -> list[JobImpact]:
    by_key = {j.key: j for j in inp.snapshot.jobs}
    also = _evicted_jobs(before)
    out = []
    for key, evictions in _evicted_jobs(after).items():
        first = evictions[0]
        evictor = rows.get(first.evictor_job or "")
        impact = _impact(
            by_key[key],
            rows.get(key),
            len(evictions),
            how=first.action,
            message=inp.index.text(first.message),
            evictor_job=evictor.name if evictor else inp.index.job_name(first.evictor_job or ""),
            evictor_queue=first.evictor_queue,
            without_change=key in also,
        )
        lost = {e.task for e in evictions}
        impact.gpus = round(sum(t.gpu for t in by_key[key].tasks if t.key in lost), 2)
        out.append(impact)
    return out


def _reclaimable(
    inp: CycleInput,
    after: engine.CycleResult,
    allocated: dict[str, dict[str, float]],
    rows: dict[str, Job],
) -> list[JobImpact]:
    """Running preemptible jobs above their leaf queue's allocatable share, in victim order (module doc)."""
    nodes = {n.name: n for n in inp.snapshot.nodes}
    evicted = _evicted_jobs(after)
    out = []
    for q in inp.snapshot.queues:
        outcome = after.queues.get(q.name)
        held = dict(allocated.get(q.name, {}))
        jobs = [
            j
            for j in inp.snapshot.jobs
            if j.queue == q.name and any(t.state == engine.TaskState.RUNNING for t in j.tasks)
        ]
        if outcome is None or not jobs:
            continue
        share = {r: _allocatable_share(q.res(r), outcome.fair_share.get(r, 0.0)) for r in RESOURCES}

        def above() -> bool:
            return any(share[r] >= 0 and held[r] > share[r] + EPS for r in RESOURCES)  # noqa: B023

        order = {j.key: i for i, j in enumerate(jobs)}
        victims = sorted(
            (j for j in jobs if j.is_preemptible),
            key=lambda j: (
                j.priority,
                j.last_start_s if j.last_start_s is not None else float("inf"),
                j.created_s,
                -order[j.key],
            ),
        )
        for job in victims:
            if not above():
                break
            running = [t for t in job.tasks if t.state == engine.TaskState.RUNNING]
            for t in running:
                for r, amount in _charge(t, nodes).items():
                    held[r] = round(held[r] - amount, 6)
            how = "evicted next cycle" if job.key in evicted else "reclaimable"
            impact = _impact(job, rows.get(job.key), len(running), how=how)
            impact.gpus = round(sum(t.gpu for t in running), 2)
            out.append(impact)
    return out


def _allocatable_share(res: engine.QueueResource, fair_share: float) -> float:
    """kai-semantics §2.6: max(deserved, fair share), capped at the limit; -1 = unlimited."""
    if res.quota == UNLIMITED:
        return res.limit
    share = max(res.quota, fair_share)
    return min(share, res.limit) if res.limit != UNLIMITED else share


def _warnings(row: Queue, used: dict[str, float]) -> list[UsageWarning]:
    out = []
    for r in RESOURCES:
        amount = used.get(r, 0.0)
        quota, limit = float(row.quota(r)), float(row.limit(r))
        uses = format_amount(r, _dec(amount))
        if quota != UNLIMITED and amount > quota + EPS:
            above = format_amount(r, _dec(amount - quota))
            out.append(
                UsageWarning(
                    r, "quota", quota, amount,
                    f"{RESOURCE_LABELS[r]} quota {format_amount(r, _dec(quota))} is below the {uses} "
                    f"{row.name} uses now: {above} above the quota becomes reclaimable by queues below "
                    "their fair share.",
                )
            )  # fmt: skip
        if limit != UNLIMITED and amount > limit + EPS:
            above = format_amount(r, _dec(amount - limit))
            out.append(
                UsageWarning(
                    r, "limit", limit, amount,
                    f"{RESOURCE_LABELS[r]} limit {format_amount(r, _dec(limit))} is below the {uses} "
                    f"{row.name} uses now ({above} over). Nothing is evicted for a limit, but no new "
                    f"job of {row.name} starts until its use falls below the limit.",
                )
            )  # fmt: skip
    return out


def _dec(value: float) -> Decimal:
    return Decimal(str(round(value, 2)))
