"""Submitting a job: validate it and create its pods, all or nothing."""

from __future__ import annotations

from django.db import transaction

from kai_portal.workloads.models import Job, Pod


@transaction.atomic
def submit(job: Job) -> Job:
    """Save a new job (running every model rule) and create its pending pods."""
    job.save()
    Pod.objects.bulk_create(Pod(job=job, index=i, name=f"{job.name}-{i}") for i in range(job.task_count))
    return job
