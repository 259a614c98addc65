"""Pruning of scheduling history after its retention period (issue 10).

A job's decisions and job messages outlive the job and its pods (``Decision``
keeps the pod's name); they are deleted only once their cycle is older than
``REASON_RETENTION_DAYS``. Usage samples go after ``USAGE_RETENTION_DAYS``.
Cycle records older than the reason retention go with their decisions, unless
a usage sample still points at them (that link is cleared, not kept alive).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from kai_portal.history.models import Decision, JobMessage, SchedulingCycle, UsageSample
from kai_portal.nodes.models import PoolUsageSample

BATCH = 5000


@dataclass(frozen=True)
class PruneReport:
    reason_cutoff: datetime
    usage_cutoff: datetime
    decisions: int
    job_messages: int
    usage_samples: int
    cycles: int


def cutoffs(now: datetime) -> tuple[datetime, datetime]:
    """(reason cutoff, usage cutoff): rows strictly older than these are pruned."""
    return (
        now - timedelta(days=settings.REASON_RETENTION_DAYS),
        now - timedelta(days=settings.USAGE_RETENTION_DAYS),
    )


def _delete_in_batches(queryset: models.QuerySet[models.Model]) -> int:
    total = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:BATCH])
        if not ids:
            return total
        with transaction.atomic():
            deleted, _ = queryset.model._default_manager.filter(pk__in=ids).delete()  # type: ignore[attr-defined]
        total += len(ids)
        if deleted == 0:
            return total


def prune_history(now: datetime | None = None) -> PruneReport:
    """Delete decisions, job messages and cycles older than the reason retention, usage samples
    older than the usage retention. Times are judged by the cycle's (simulated) start."""
    now = now or timezone.now()
    reason_cutoff, usage_cutoff = cutoffs(now)
    decisions = _delete_in_batches(Decision.objects.filter(cycle__started_at__lt=reason_cutoff))
    messages = _delete_in_batches(JobMessage.objects.filter(cycle__started_at__lt=reason_cutoff))
    samples = _delete_in_batches(UsageSample.objects.filter(sampled_at__lt=usage_cutoff))
    samples += _delete_in_batches(PoolUsageSample.objects.filter(sampled_at__lt=usage_cutoff))
    cycles = _delete_in_batches(SchedulingCycle.objects.filter(started_at__lt=reason_cutoff))
    return PruneReport(reason_cutoff, usage_cutoff, decisions, messages, samples, cycles)
