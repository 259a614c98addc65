"""The jobs an eviction action may take from, and the minimum-runtime protection that keeps a
victim's gang core (§5.3; KAI's ``minruntime`` plugin: its victim filters and scenario validators)."""

from __future__ import annotations

from collections.abc import Callable

from scheduler import gang
from scheduler.actions.solvers.budget import spend
from scheduler.actions.solvers.scenario import Outcome
from scheduler.actions.solvers.victim_order import ACTIVE
from scheduler.model import Job
from scheduler.session import Session


def is_elastic(job: Job) -> bool:
    return len(job.tasks) > job.gang_min


def protected(job: Job, min_runtime: float) -> bool:
    """Inside its minimum guaranteed runtime (§5.3); jobs without a start time are not."""
    return job.last_start_s is not None and min_runtime > 0 and job.last_start_s < min_runtime


def min_runtime_ok(session: Session, outcome: Outcome, core_protected: set[str]) -> bool:
    """A protected elastic job may lose only its surplus (KAI's ``minruntime`` scenario validators:
    a protected victim must keep its minimum available pods)."""
    for c in outcome.contributions:
        if c.job.key in core_protected and not gang.gang_satisfied(session, c.job):
            return False
    return True


def split_candidates(
    session: Session, jobs: list[Job], min_runtime: Callable[[Job], float]
) -> tuple[list[Job], set[str]]:
    """The victims left after the minimum-runtime filter, and the names of those of them whose
    gang core is protected: a protected job that is not elastic is no victim at all, an elastic
    one gives only its surplus (KAI's ``minruntime`` victim filters)."""
    out: list[Job] = []
    core_protected: set[str] = set()
    for v in jobs:
        if protected(v, min_runtime(v)):
            if not is_elastic(v):
                continue
            core_protected.add(v.key)
        out.append(v)
    return out, core_protected


def victim_jobs(
    session: Session, preemptor: Job, queue: str | None = None, below: int | None = None
) -> list[Job]:
    """Preemptible jobs with active tasks in leaf queues, in job order; only ``queue``'s jobs and
    only priorities below ``below`` when given (checked first: they are the cheap filters)."""
    jobs = session.jobs.values() if queue is None else session.jobs_of_queue(queue)
    spend(session, len(jobs))  # the list is a scan of them: work for the action's budget
    # The jobs with an active task, whoever asks, kept while no node changes: a task becomes
    # active or stops being active only with a change of its node's resources (a placement, an
    # eviction, their undo), which bumps ``node_version``; a status set on a placed task
    # (``Statement.set_status``) moves between active statuses or follows a placement.
    found = session.per_node_version(_ActiveJobs)
    active = found.get((queue, below))
    if active is None:
        active = found[(queue, below)] = _active_jobs(session, queue, below)
    return [v for v in active if v is not preemptor]


class _ActiveJobs(dict[tuple[str | None, int | None], list[Job]]):
    """``victim_jobs``' table for one node version (``Session.per_node_version``), by queue and
    priority bound."""

    def __init__(self, session: Session) -> None:
        super().__init__()


def _active_jobs(session: Session, queue: str | None, below: int | None) -> list[Job]:
    """``victim_jobs`` for no preemptor."""
    placements = session.placements
    out = []
    # ``active_tasks(session, v)`` is non-empty, asked only as far as the first active task: the
    # scan runs over every preemptible job once per node version.
    for v in session.preemptible_leaf_jobs(queue):
        if below is not None and not v.priority < below:
            continue
        for t in v.tasks:
            p = placements.get(t.key) or placements.on_demand(t.key)  # gang.status, inline
            if p is not None and p.status in ACTIVE:
                out.append(v)
                break
    return out
