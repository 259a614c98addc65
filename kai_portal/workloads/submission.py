"""Submitting a job: validate it and create its pods, all or nothing."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from kai_portal.workloads import cluster_jobs
from kai_portal.workloads.capacity import oversized_task_errors
from kai_portal.workloads.models import Job, Pod
from kai_portal.workloads.pending_bounds import check_pending_bounds

MAX_IDEMPOTENCY_KEY = 255


@transaction.atomic
def submit(job: Job, manifest: cluster_jobs.Manifest | None = None) -> Job:
    """Save a new job (running every model rule) and create its pending pods.

    A job whose task is larger than every node of its pool is refused (``ValidationError``): it
    could never start. The fit check does not refuse it: it explains it with the engine's reason.
    A job that would take its member, team or queue past a bound of pending tasks is refused
    too (``pending_bounds``).

    In kubernetes mode the pods are also created in the cluster (``cluster_jobs``), from the
    user's ``manifest`` when the job came from one; a refusal there raises
    ``cluster_jobs.ClusterRefused`` and nothing is saved.
    """
    job.full_clean()
    oversized = oversized_task_errors(job)
    if oversized:
        raise ValidationError({field: [message] for field, message in oversized.items()})
    # Past the model rules (a valid queue and task count), before anything is saved; locks the
    # team and queue rows for the rest of this transaction.
    check_pending_bounds(job)
    cluster_jobs.place(job)  # after full_clean: a cluster_key turns the name checks off
    job.save(validate=False)
    Pod.objects.bulk_create(Pod(job=job, index=i, name=f"{job.name}-{i}") for i in range(job.task_count))
    cluster_jobs.create(job, manifest)
    return job


def earlier_submission(submitter: Any, key: str) -> Job | None:
    """The job this submitter already created with this Idempotency-Key, if any."""
    if not key or submitter is None:
        return None
    return Job.objects.filter(submitter=submitter, idempotency_key=key).first()


def submit_once(job: Job, key: str = "", manifest: cluster_jobs.Manifest | None = None) -> tuple[Job, bool]:
    """``submit``, unless the submitter already sent this key: then (that job, False).

    A client that lost the answer (a dropped connection after the commit) retries with
    the same key and gets the first job back, not a duplicate. Two retries racing each
    other meet at the unique constraint on (submitter, key); the loser returns the winner's job.
    """
    if not key:
        return submit(job, manifest), True
    earlier = earlier_submission(job.submitter, key)
    if earlier is not None:
        return earlier, False
    job.idempotency_key = key
    try:
        with transaction.atomic():
            return submit(job, manifest), True
    except (IntegrityError, ValidationError):
        earlier = earlier_submission(job.submitter, key)
        if earlier is None:
            raise
        return earlier, False
