"""Job (pod group) state used by ordering and actions: gang minimum, sub-groups, elastic extras.

A job is satisfied when its active pods reach the job's minimum and every sub-group's active
pods reach the sub-group's minimum (kai-semantics §4.3, §5.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler.model import Job, Task, TaskState
from scheduler.session import Session

ACTIVE_ALLOCATED = (TaskState.RUNNING, TaskState.ALLOCATED, TaskState.PIPELINED)


def status(session: Session, task: Task) -> TaskState:
    p = session.placements.get(task.name)
    return p.status if p else TaskState.PENDING


def active_allocated(session: Session, job: Job) -> int:
    return sum(1 for t in job.tasks if status(session, t) in ACTIVE_ALLOCATED)


def pending_tasks(session: Session, job: Job) -> list[Task]:
    """Pending tasks in task order (file order stands for pod age)."""
    return [t for t in job.tasks if status(session, t) == TaskState.PENDING]


def alive(session: Session, job: Job) -> int:
    return active_allocated(session, job) + len(pending_tasks(session, job))


def subgroup_mins(job: Job) -> dict[str, int]:
    return {g.name: g.min_available for g in job.subgroups}


def subgroup_counts(tasks: Iterable[Task], job: Job) -> dict[str, int]:
    out = dict.fromkeys(subgroup_mins(job), 0)
    for t in tasks:
        if t.subgroup in out:
            out[t.subgroup] += 1
    return out


def short_subgroup(job: Job, tasks: Sequence[Task]) -> str | None:
    """The first sub-group (in the job's order) that ``tasks`` leave below its minimum."""
    if not job.subgroups:
        return None
    counts = subgroup_counts(tasks, job)
    for g in job.subgroups:
        if counts[g.name] < g.min_available:
            return g.name
    return None


def meets_minimum(job: Job, tasks: Sequence[Task]) -> bool:
    """Whether these pods (as the job's active ones) satisfy the job and every sub-group."""
    return len(tasks) >= job.gang_min and short_subgroup(job, tasks) is None


def active_tasks(session: Session, job: Job) -> list[Task]:
    return [t for t in job.tasks if status(session, t) in ACTIVE_ALLOCATED]


def is_ready(session: Session, job: Job) -> bool:
    """A job whose pods could never reach its gang minimum is not scheduled (§1.2)."""
    if not job.subgroups:
        return alive(session, job) >= job.gang_min
    live = [
        t
        for t in job.tasks
        if status(session, t) in ACTIVE_ALLOCATED or status(session, t) == TaskState.PENDING
    ]
    return meets_minimum(job, live)


def step_tasks(session: Session, job: Job) -> list[Task]:
    """Tasks to place in the next step: the missing gang members, or one elastic extra (§5.1).

    With sub-groups: first each sub-group's missing members (sub-groups below their minimum
    first), then more pods until the job's own minimum; an elastic extra comes from the
    sub-group with the lowest allocated/minimum ratio (§4.3)."""
    pending = pending_tasks(session, job)
    if not job.subgroups:
        missing = job.gang_min - active_allocated(session, job)
        if missing > 0:
            return pending[:missing]
        return pending[:1]
    active = active_tasks(session, job)
    counts = subgroup_counts(active, job)
    mins = subgroup_mins(job)
    chosen: list[Task] = []
    for g in job.subgroups:
        need = g.min_available - counts[g.name]
        if need > 0:
            chosen.extend([t for t in pending if t.subgroup == g.name][:need])
    missing = job.gang_min - len(active) - len(chosen)
    if missing > 0:
        taken = {t.name for t in chosen}
        chosen.extend([t for t in pending if t.name not in taken][:missing])
    if chosen:
        return sorted(chosen, key=job.tasks.index)

    def ratio(t: Task) -> tuple[int, float, int]:
        if t.subgroup in mins:
            m = mins[t.subgroup]
            # required sub-groups before optional ones, then fewer allocated per minimum
            return (0 if m > 0 else 1, counts[t.subgroup] / m if m > 0 else counts[t.subgroup], 0)
        return (1, float(len(active)), 0)

    return sorted(pending, key=ratio)[:1]


def surplus_task(job: Job, remaining: Sequence[Task]) -> Task | None:
    """The first of ``remaining`` (a job's active pods, in victim order) that can go while the
    rest still satisfy the job and every sub-group; None when none can."""
    if len(remaining) <= job.gang_min:
        return None
    if not job.subgroups:
        return remaining[0]
    counts = subgroup_counts(remaining, job)
    mins = subgroup_mins(job)
    for t in remaining:
        if t.subgroup not in mins or counts[t.subgroup] > mins[t.subgroup]:
            return t
    return None


def elastic_state(session: Session, job: Job) -> int:
    """0 below the gang minimum, 1 exactly at it, 2 above it."""
    if not job.subgroups:
        n = active_allocated(session, job)
        m = job.gang_min
        return 0 if n < m else (1 if n == m else 2)
    active = active_tasks(session, job)
    if not meets_minimum(job, active):
        return 0
    return 2 if surplus_task(job, active) is not None else 1


def gang_satisfied(session: Session, job: Job) -> bool:
    if not job.subgroups:
        return active_allocated(session, job) >= job.gang_min
    return meets_minimum(job, active_tasks(session, job))
