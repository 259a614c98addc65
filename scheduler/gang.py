"""Job (pod group) state used by ordering and actions: gang minimum, elastic extras."""

from __future__ import annotations

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


def is_ready(session: Session, job: Job) -> bool:
    """A job whose pods could never reach its gang minimum is not scheduled (§1.2)."""
    return alive(session, job) >= job.gang_min


def step_tasks(session: Session, job: Job) -> list[Task]:
    """Tasks to place in the next step: the missing gang members, or one elastic extra (§5.1)."""
    pending = pending_tasks(session, job)
    missing = job.gang_min - active_allocated(session, job)
    if missing > 0:
        return pending[:missing]
    return pending[:1]


def elastic_state(session: Session, job: Job) -> int:
    """0 below the gang minimum, 1 exactly at it, 2 above it."""
    n = active_allocated(session, job)
    m = job.gang_min
    return 0 if n < m else (1 if n == m else 2)


def gang_satisfied(session: Session, job: Job) -> bool:
    return active_allocated(session, job) >= job.gang_min
