"""What an eviction action leaves behind: notes on the jobs it could not help and the
evictions of a scenario it committed."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.actions.common.notes import Note
from scheduler.actions.solvers.scenario import Outcome
from scheduler.model import Job, Task
from scheduler.reasons import Reason
from scheduler.result import Eviction
from scheduler.session import Session


def add_note(session: Session, job: Job, note: Note) -> None:
    """Keep the note on the job once (``session.action_notes``; a later action that helps the job
    drops them)."""
    notes = session.action_notes.setdefault(job.key, [])
    if note not in notes:
        notes.append(note)


def record(
    session: Session,
    action: str,
    job: Job,
    outcome: Outcome,
    describe: Callable[[Job, Task, Outcome], tuple[Reason, Reason]],
) -> None:
    """Record a committed scenario: an ``Eviction`` per victim (moved or not), worded by the
    action's ``describe``, the evicted tasks' reasons and an "Evict" event per victim task."""
    for t, moved in [(t, False) for t in outcome.victims] + [(t, True) for t in outcome.moved]:
        vjob = session.task_job[t.key]
        message, why = describe(job, t, outcome)
        p = session.placements[t.key]
        ev = Eviction(
            task=t.key,
            job=vjob.key,
            queue=vjob.queue,
            action=action,
            message=message,
            evictor_job=job.key,
            evictor_queue=job.queue,
            reason=why,
            node=outcome.origin.get(t.key, p.node),
            moved_to=p.node if moved else None,
            pool=session.pool,
        )
        session.evictions.append(ev)
        if moved and ev.node is not None:
            session.moved_off.setdefault(t.key, set()).add(ev.node)
        if not moved:
            session.task_reasons[t.key] = message
        session.events.append((vjob.key, "Evict", message))
