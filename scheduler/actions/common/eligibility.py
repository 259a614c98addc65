"""Whether a pending job may trigger evictions yet: its preemption delay (§5.5; KAI's
``actions/common/action_eligibility.go``)."""

from __future__ import annotations

from datetime import UTC, timedelta

from scheduler import reasons
from scheduler.actions.common.notes import Note
from scheduler.model import Job
from scheduler.session import Session


def within_preemption_delay(session: Session, job: Job) -> bool:
    """Whether the job must still wait before it may evict anyone."""
    return preemption_delay_left(job) > 0


def preemption_delay_left(job: Job) -> float:
    """Seconds until the job may trigger evictions: ``max(creation, last eviction) + delay`` (§5.5)."""
    if job.preemption_delay_s is None:
        return 0.0
    waited = job.created_s if job.last_eviction_s is None else min(job.created_s, job.last_eviction_s)
    return job.preemption_delay_s - waited


def preemption_delay_note(session: Session, job: Job) -> Note:
    """The note of a job still inside its preemption delay, with the time it ends (UTC)."""
    until = session.config.now + timedelta(seconds=preemption_delay_left(job))
    text = until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return reasons.PREEMPTION_DELAY_NOT_ELAPSED, reasons.preemption_delay(job.preemption_delay_s or 0.0, text)
