"""Submitting a job: validate it and create its pods, all or nothing."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from kai_portal.workloads.capacity import oversized_task_errors
from kai_portal.workloads.models import Job, Pod


@transaction.atomic
def submit(job: Job) -> Job:
    """Save a new job (running every model rule) and create its pending pods.

    A job whose task is larger than every node of its pool is refused (``ValidationError``): it
    could never start. The fit check does not refuse it: it explains it with the engine's reason.
    """
    job.full_clean()
    oversized = oversized_task_errors(job)
    if oversized:
        raise ValidationError({field: [message] for field, message in oversized.items()})
    job.save(validate=False)
    Pod.objects.bulk_create(Pod(job=job, index=i, name=f"{job.name}-{i}") for i in range(job.task_count))
    return job
