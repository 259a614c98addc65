"""What blocks each pending job, stored on the job for its page (``Job.blockers``), straight from
the engine's structured result (``CycleResult.job_blockers``), never re-derived from text.

A job that waits for room in its pool also gets what the cycle's idle room offers it
(``scheduler.room``, on ``CycleResult.node_room``): the most GPUs per pod that fit in its pool now,
and the other pools where the whole request fits now (a whole-cluster cycle sees every pool; a
pool's own cycle sees only its own, so it names none).

Each item keeps the engine's numbers and names, with the cluster's own names for jobs and an
absolute time where the engine gives seconds (a protected job becomes reclaimable at the
cycle's time plus the seconds left: its start plus its minimum runtime, so the same from one
cycle to the next). Only the jobs whose items changed are written.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

import scheduler
from kai_portal.scheduling.snapshot_index import CycleInput, SnapshotIndex
from kai_portal.workloads.choices import JobState
from kai_portal.workloads.models import Job


def _whole_second_after(moment: datetime) -> datetime:
    """``moment`` rounded up to a whole second (to the millisecond first: the float seconds the
    engine counts differ by a microsecond from one cycle to the next), so the time shown is never
    before the protection ends."""
    ms = round(moment.microsecond / 1000)
    whole = moment.replace(microsecond=0)
    return whole if ms == 0 else whole + timedelta(seconds=1)


def item(reason: scheduler.Reason, index: SnapshotIndex, now: datetime) -> dict[str, Any]:
    """One blocker as stored: its kind, the engine's parameters and its text."""
    p = reason.params
    out: dict[str, Any] = {"code": reason.code, "text": index.text(reason)}
    if reason.code == scheduler.PROTECTED_BY_MIN_RUNTIME:
        action, ref, queue, left, surplus_only = p
        assert isinstance(ref, scheduler.Ref) and isinstance(left, float)
        row = index.jobs.get(ref.key)
        until = _whole_second_after(now + timedelta(seconds=left))
        del out["text"]  # its words count the seconds left: the page words it from ``until``
        out.update(kind="protected", action=action, queue=queue, surplus_only=surplus_only,
                   job_id=row.job_id if row else None, job=index.shown(ref), namespace=ref.namespace,
                   until=until.isoformat())  # fmt: skip
    elif reason.code == scheduler.RECLAIM_SOURCE:
        out.update(kind="source", queue=p[0], used=dict(p[1]), fair_share=dict(p[2]))  # type: ignore[arg-type]
    elif reason.code == scheduler.OVER_LIMIT:
        queue, r, limit, allocated, requested = p
        out.update(
            kind="limit", queue=queue, resource=r, limit=limit, allocated=allocated, requested=requested
        )
    elif reason.code == scheduler.NON_PREEMPTIBLE_OVER_QUOTA:
        queue, r, requested, quota, allocated = p
        out.update(
            kind="quota", queue=queue, resource=r, quota=quota, allocated=allocated, requested=requested
        )
    else:
        out["kind"] = "note"
    return out


# Fit errors after which room elsewhere is no answer (the job is refused, not short of room).
_NOT_ROOM = frozenset(
    {scheduler.QUEUE_DOES_NOT_EXIST, scheduler.OVER_LIMIT, scheduler.NON_PREEMPTIBLE_OVER_QUOTA}
)
_MAX_POOLS = 3  # other pools named at most


class _Room:
    """The room items of the cycle's capacity waits, one computation per pool, rules and shape."""

    def __init__(self, inp: CycleInput, result: scheduler.CycleResult) -> None:
        self.result = result
        self.jobs = {j.key: j for j in inp.snapshot.jobs}
        self._memo: dict[tuple[object, ...], list[dict[str, Any]]] = {}

    def items(self, key: str, found: list[scheduler.Reason]) -> list[dict[str, Any]]:
        message = self.result.job_messages.get(key)
        job = self.jobs.get(key)
        if message is None or job is None or message.code in _NOT_ROOM:
            return []
        if any(r.code in _NOT_ROOM for r in found):
            return []
        outcomes = [self.result.tasks.get(t.key) for t in job.tasks]
        waiting = scheduler.TaskState.PENDING
        pending = [t for t, o in zip(job.tasks, outcomes, strict=True) if o and o.status == waiting]
        shape = scheduler.room_shape(job, pending)
        if shape is None or shape.gpus < 1:
            return []
        pool = next(o.pool for o in outcomes if o is not None)
        rules_of = (job.node_selector, job.node_affinity, job.tolerations, job.anti_affinity_key)
        memo_key = (pool, shape, repr(rules_of))
        hit = self._memo.get(memo_key)
        if hit is None:
            hit = self._memo[memo_key] = self._compute(job, pool, shape)
        return hit

    def _compute(self, job: scheduler.Job, pool: str, shape: scheduler.RoomShape) -> list[dict[str, Any]]:
        rooms = self.result.node_room
        own = scheduler.room_eligible(job, rooms.get(pool, []))
        if scheduler.room_fits(job, shape, own) is not None:
            return []  # it fits as asked: the wait is not for room
        out: list[dict[str, Any]] = [
            {"kind": "smaller", "pool": pool, "pods": shape.pods, "requested": shape.gpus,
             "gpus": scheduler.largest_per_pod(job, shape, own)}
        ]  # fmt: skip
        for other in sorted(rooms):
            if other == pool or len(out) > _MAX_POOLS:
                continue
            there = scheduler.room_eligible(job, rooms[other])
            nodes = scheduler.room_fits(job, shape, there)
            if nodes is None:
                continue
            idle = {r.node.name: r.idle_gpus for r in there}
            out.append(
                {"kind": "pool", "pool": other, "pods": shape.pods, "requested": shape.gpus,
                 "nodes": len(set(nodes)), "idle": sum(idle[n] for n in set(nodes))}
            )  # fmt: skip
        return out


def persist_blockers(
    inp: CycleInput, result: scheduler.CycleResult, now: datetime, skip: Collection[int]
) -> None:
    """Write each pending job's blockers where they changed; clear them on jobs that have none now."""
    index = inp.index
    new: dict[int, dict[str, Any]] = {}
    rooms = _Room(inp, result)
    for key in result.job_blockers.keys() | result.job_messages.keys():
        ref = index.jobs.get(key)
        if ref is None or ref.job_id in skip:
            continue
        found = result.job_blockers.get(key, [])
        items = [item(r, index, now) for r in found] + rooms.items(key, found)
        if items:
            new[ref.job_id] = {"items": items}
    ids = [ref.job_id for ref in index.jobs.values() if ref.job_id not in skip]
    stored = dict(
        Job.objects.filter(pk__in=ids, blockers__isnull=False).values_list("pk", "blockers")
    ) if ids else {}  # fmt: skip
    gone = stored.keys() - new.keys()
    if gone:
        Job.objects.filter(pk__in=gone).update(blockers=None)
    # Jobs alike in shape and rules share their room items (and often all of them): one write per
    # distinct value, so a backlog whose room changes is not rewritten row by row.
    changed: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for job_id, value in new.items():
        if stored.get(job_id) != value:
            changed.setdefault(json.dumps(value, sort_keys=True), (value, []))[1].append(job_id)
    for value, job_ids in changed.values():
        Job.objects.filter(pk__in=job_ids, state=JobState.PENDING).update(blockers=value)
