"""What stopped an eviction search for a pending job, kept for the job's page
(``CycleResult.job_blockers``): the jobs the action could have taken from but for their minimum
runtime, with the seconds each stays protected, and (reclaim) the queues above their fair share
it may take from.

Recorded when the action leaves its note on the job (``ActionPolicy.explain``), in the state the
search met. It reads the session and changes nothing: no budget is spent, so the decisions are
those of a cycle without it (held by the equivalence check)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scheduler import gang, reasons
from scheduler.actions.solvers.victim_jobs import is_elastic, protected
from scheduler.model import Job
from scheduler.reasons import Reason, Ref
from scheduler.session import Session

# Per action: the blockers of a job, by job key (``Session.blockers``).
Blockers = dict[str, list[Reason]]


def find(
    session: Session,
    action: str,
    preemptor: Job,
    jobs: Iterable[Job],
    may_take: Callable[[Job], bool],
    min_runtime: Callable[[Job], float],
    sources: bool,
    known_sources: Iterable[str] = (),
) -> list[Reason]:
    """The protected jobs among those the action may take from (``victim_jobs``' filters, then
    ``may_take``), nearest end of protection first; with ``sources``, then the leaf queues they and
    the unprotected victims are in, above their fair share. ``known_sources``: leaf queues the
    caller already knows hold such a victim, and none protected, whose jobs it leaves out of
    ``jobs``."""
    protected_jobs: list[tuple[float, str, Reason]] = []
    queues: set[str] = set(known_sources)
    for v in jobs:
        if v is preemptor or not v.is_preemptible or v.queue not in session.queues:
            continue
        if not session.queues[v.queue].is_leaf or not may_take(v) or not gang.active_allocated(session, v):
            continue
        queues.add(v.queue)
        runtime = min_runtime(v)
        if protected(v, runtime):
            left = runtime - (v.last_start_s or 0.0)
            ref = Ref(v.key, v.namespace, kind="job")
            protected_jobs.append(
                (left, v.key, reasons.protected_job(action, ref, v.queue, left, is_elastic(v)))
            )
    out = [r for _left, _key, r in sorted(protected_jobs, key=lambda e: (e[0], e[1]))]
    if sources:
        for name in sorted(queues):
            qs = session.queues[name]
            out.append(reasons.reclaim_source(name, qs.allocated, qs.fair_share))
    return out


def record(session: Session, action: str, job: Job, found: list[Reason]) -> None:
    """Keep what the action found for the job (the latest run of the action wins)."""
    session.blockers.setdefault(action, {})[job.key] = found
