"""The stale gang eviction action (§3.10; KAI's ``actions/stalegangeviction``): a running gang
that has been below its minimum past its grace period is evicted whole."""

from __future__ import annotations

from scheduler import gang, reasons
from scheduler.model import TaskState
from scheduler.reasons import Ref
from scheduler.result import Eviction
from scheduler.session import Session

ACTIVE_USED = (TaskState.RUNNING, TaskState.ALLOCATED, TaskState.PIPELINED, TaskState.RELEASING)


def stale_gang_eviction(session: Session) -> None:
    """Evict, whole, every running gang that has been below its minimum past its grace period."""
    placements = session.placements
    active_used = ACTIVE_USED
    # Only these can be stale: every other job is one pod loaded running (``load_tasks``).
    candidates = session.stale_candidates
    for job in session.jobs.values() if candidates is None else candidates:
        if not job.subgroups:
            # ``gang_min`` without sub-groups, inline (a job per pod in a large cluster): one
            # active pod meets a minimum of one, and a job with none is not stale.
            if (len(job.tasks) if job.min_available is None else job.min_available) <= 1:
                continue
            # Without sub-groups only the count matters (``short_subgroup`` is None): counted
            # inline, as ``gang.status`` reads it, before any list is made.
            used = 0
            for t in job.tasks:
                p = placements.get(t.key) or placements.on_demand(t.key)
                if p is not None and p.status in active_used:
                    used += 1
            if used == 0 or used >= job.gang_min:
                continue
        used_tasks = [t for t in job.tasks if gang.status(session, t) in active_used]
        used = len(used_tasks)
        short = gang.short_subgroup(job, used_tasks)
        if used == 0 or (used >= job.gang_min and short is None):
            continue
        session.events.append((job.key, "StaleJob", reasons.stale_job(used, job.gang_min)))
        grace = job.staleness_grace_period_s
        if grace is None:
            grace = session.config.staleness_grace_period_s
        stale_for = job.stale_s if job.stale_s is not None else 0.0
        if grace < 0 or stale_for < grace:
            continue
        stmt = session.statement()
        for t in job.tasks:
            p = session.placements[t.key]
            if p.status not in gang.ACTIVE_ALLOCATED:
                continue
            node = p.node
            stmt.evict(t)
            if used < job.gang_min or short is None:
                msg = reasons.evicted_stale_gang(job.gang_min, Ref(t.key, job.namespace))
            else:
                sg_min = gang.subgroup_mins(job)[short]
                msg = reasons.evicted_stale_subgroup(sg_min, short, Ref(t.key, job.namespace))
            session.evictions.append(
                Eviction(
                    task=t.key,
                    job=job.key,
                    queue=job.queue,
                    action="stalegangeviction",
                    message=msg,
                    reason=reasons.victim_stale(used, job.gang_min, stale_for, grace),
                    node=node,
                    pool=session.pool,
                )
            )
            session.task_reasons[t.key] = msg
            session.events.append((job.key, "Evict", msg))
        stmt.commit()
