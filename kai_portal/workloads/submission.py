"""Submitting a job: validate it and create its pods, all or nothing."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from kai_portal.workloads import cluster_jobs, pod_security
from kai_portal.workloads.capacity import oversized_task_errors
from kai_portal.workloads.choices import JobState
from kai_portal.workloads.models import Job, Pod
from kai_portal.workloads.pending_bounds import check_pending_bounds

MAX_IDEMPOTENCY_KEY = 255


@transaction.atomic
def submit(job: Job, manifest: cluster_jobs.Manifest | None = None) -> Job:
    """Save a new job (running every model rule) and create its pending pods.

    First of all its pods must pass its team's pod policy (``pod_security.enforce``; refused with
    ``PodPolicyRefused``, a ``ValidationError`` naming each field): every submission path comes
    through here, so none can skip it, and nothing is saved or created before it.

    A job whose task is larger than every node of its pool is refused (``ValidationError``): it
    could never start. The fit check does not refuse it: it explains it with the engine's reason.
    A job that would take its member, team or queue past a bound of pending tasks is refused
    too (``pending_bounds``).

    In kubernetes mode the pods are also created in the cluster (``cluster_jobs``), from the
    user's ``manifest`` when the job came from one; a refusal there raises
    ``cluster_jobs.ClusterRefused`` and nothing is saved.
    """
    pod_security.enforce(job, manifest)
    job.full_clean()
    oversized = oversized_task_errors(job)
    if oversized:
        raise ValidationError({field: [message] for field, message in oversized.items()})
    # Past the model rules (a valid queue and task count), before anything is saved; locks the
    # team and queue rows for the rest of this transaction.
    check_pending_bounds(job)
    cluster_jobs.place(job)  # after full_clean: a cluster_key turns the name checks off
    try:
        with transaction.atomic():
            job.save(validate=False)
    except IntegrityError:
        # Another submit of the same name committed after our check (the database's constraint
        # job_live_name_unique_in_queue): the same refusal as the check's.
        if job.state in JobState.active() and job.live_name_taken():
            raise ValidationError({"name": [job.name_taken_message()]}) from None
        raise
    Pod.objects.bulk_create(Pod(job=job, index=i, name=f"{job.name}-{i}") for i in range(job.task_count))
    cluster_jobs.create(job, manifest)
    return job


class KeyReused(Exception):
    """The Idempotency-Key was already used for another request (409): not a retry."""

    def __init__(self, key: str, job: Job) -> None:
        super().__init__(
            f"Idempotency-Key '{key[:80]}' was already used for a different request (it created job "
            f"'{job.name}'). Send a new key for a new submission, or the same body to get that job back."
        )


def request_digest(body: Any) -> str:
    """SHA-256 of a submission's body: text as sent (a manifest), parsed data (API fields) in a
    canonical form, so the same fields in another order or spacing are the same request."""
    if isinstance(body, str | bytes):
        raw = body.encode("utf-8") if isinstance(body, str) else body
        return hashlib.sha256(b"text:" + raw).hexdigest()
    if hasattr(body, "lists"):  # a QueryDict (form-encoded body): every value of every key
        body = {key: values for key, values in body.lists()}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(b"data:" + canonical.encode("utf-8")).hexdigest()


def earlier_submission(submitter: Any, key: str, digest: str = "") -> Job | None:
    """The job this submitter already created with this Idempotency-Key, if any.

    ``KeyReused`` when that job came from another request than ``digest`` (the first request's
    digest is kept with the job; jobs from before it was kept, or no digest here, always match)."""
    if not key or submitter is None:
        return None
    earlier = Job.objects.filter(submitter=submitter, idempotency_key=key).first()
    if earlier is not None and digest and earlier.request_digest and earlier.request_digest != digest:
        raise KeyReused(key, earlier)
    return earlier


def submit_once(
    job: Job, key: str = "", manifest: cluster_jobs.Manifest | None = None, digest: str = ""
) -> tuple[Job, bool]:
    """``submit``, unless the submitter already sent this key: then (that job, False).

    A client that lost the answer (a dropped connection after the commit) retries with
    the same key and gets the first job back, not a duplicate. Two retries racing each
    other meet at the unique constraint on (submitter, key); the loser returns the winner's job.
    The same key with another request (``digest``) is ``KeyReused``.
    """
    if not key:
        return submit(job, manifest), True
    earlier = earlier_submission(job.submitter, key, digest)
    if earlier is not None:
        return earlier, False
    job.idempotency_key, job.request_digest = key, digest
    try:
        with transaction.atomic():
            return submit(job, manifest), True
    except (IntegrityError, ValidationError):
        earlier = earlier_submission(job.submitter, key, digest)
        if earlier is None:
            raise
        return earlier, False
