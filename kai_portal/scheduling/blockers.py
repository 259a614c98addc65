"""What blocks each pending job, stored on the job for its page (``Job.blockers``), straight from
the engine's structured result (``CycleResult.job_blockers``), never re-derived from text.

Each item keeps the engine's numbers and names, with the cluster's own names for jobs and an
absolute time where the engine gives seconds (a protected job becomes reclaimable at the
cycle's time plus the seconds left: its start plus its minimum runtime, so the same from one
cycle to the next). Only the jobs whose items changed are written.
"""

from __future__ import annotations

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


def persist_blockers(
    inp: CycleInput, result: scheduler.CycleResult, now: datetime, skip: Collection[int]
) -> None:
    """Write each pending job's blockers where they changed; clear them on jobs that have none now."""
    index = inp.index
    new: dict[int, dict[str, Any]] = {}
    for key, found in result.job_blockers.items():
        ref = index.jobs.get(key)
        if ref is None or ref.job_id in skip:
            continue
        new[ref.job_id] = {"items": [item(r, index, now) for r in found]}
    ids = [ref.job_id for ref in index.jobs.values() if ref.job_id not in skip]
    stored = dict(
        Job.objects.filter(pk__in=ids, blockers__isnull=False).values_list("pk", "blockers")
    ) if ids else {}  # fmt: skip
    for job_id in stored.keys() - new.keys():
        Job.objects.filter(pk=job_id).update(blockers=None)
    for job_id, value in new.items():
        if stored.get(job_id) != value:
            Job.objects.filter(pk=job_id, state=JobState.PENDING).update(blockers=value)
