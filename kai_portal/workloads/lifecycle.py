"""Job state transitions that users trigger (the scheduling loop owns the rest).

Every transition is a conditional UPDATE on the expected old state, so a user
cancelling a job and a cycle finishing it cannot both win.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod


class TransitionError(Exception):
    """The job is no longer in a state that allows this change."""


@transaction.atomic
def cancel_job(job: Job, actor: Any = None) -> Job:
    """Withdraw an active job: pods on nodes go to releasing, pending pods end as failed.

    The cluster backend deletes releasing pods on the next cycle; the job keeps its
    pods and decisions as history.
    """
    now = timezone.now()
    changed = Job.objects.filter(pk=job.pk, state__in=JobState.active()).update(
        state=JobState.CANCELLED, finished_at=now, updated_at=now
    )
    if changed != 1:
        job.refresh_from_db()
        raise TransitionError(f"Job {job.name} is {job.get_state_display().lower()} and cannot be cancelled.")
    who = getattr(actor, "username", None) or "the system"
    reason = f"Job cancelled by {who}."
    pods = Pod.objects.filter(job=job)
    pods.filter(state__in=[PodState.BOUND, PodState.RUNNING]).update(
        state=PodState.RELEASING, reason=reason, reason_at=now, updated_at=now
    )
    pods.filter(state=PodState.PENDING).update(
        state=PodState.FAILED, reason=reason, reason_at=now, finished_at=now, updated_at=now
    )
    job.refresh_from_db()
    return job
