"""A queue's computed numbers per resource: deserved, fair share, allocated, requested.

The scheduling loop computes them every cycle. This is the one place that reads
them, so the source can change without touching callers: the
``scheduling.QueueStatus`` row per queue and resource (rewritten every cycle),
else the latest ``scheduling.UsageSample`` row; a queue with neither gets
``None`` for every number.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import TypedDict

from django.db.models import OuterRef, Subquery

from kai_portal.core.units import RESOURCES
from kai_portal.queues.models import Queue

STATUS_FIELDS = ("deserved", "fair_share", "allocated", "allocated_non_preemptible", "requested")


class ResourceStatus(TypedDict):
    deserved: Decimal | None
    fair_share: Decimal | None
    allocated: Decimal | None
    allocated_non_preemptible: Decimal | None
    requested: Decimal | None
    sampled_at: datetime | None


def empty_status() -> ResourceStatus:
    return ResourceStatus(
        deserved=None,
        fair_share=None,
        allocated=None,
        allocated_non_preemptible=None,
        requested=None,
        sampled_at=None,
    )


def latest_status(queues: Iterable[Queue | int]) -> dict[int, dict[str, ResourceStatus]]:
    """``{queue_id: {"gpu": {...}, "cpu": {...}, "memory": {...}}}`` in one or two queries."""
    from kai_portal.history.models import QueueStatus

    ids = [q if isinstance(q, int) else q.pk for q in queues]
    result: dict[int, dict[str, ResourceStatus]] = {i: {r: empty_status() for r in RESOURCES} for i in ids}
    if not ids:
        return result
    missing = set(ids)
    rows = QueueStatus.objects.filter(queue_id__in=ids).values(
        "queue_id", "resource", "updated_at", *STATUS_FIELDS
    )
    for row in rows:
        _fill(result, row, row["updated_at"])
        missing.discard(row["queue_id"])
    if missing:
        _from_usage_samples(result, missing)
    return result


def _fill(result: dict[int, dict[str, ResourceStatus]], row: dict, at: datetime | None) -> None:
    if row["resource"] not in RESOURCES:
        return
    status = result[row["queue_id"]][row["resource"]]
    for field in STATUS_FIELDS:
        status[field] = row[field]  # type: ignore[literal-required]
    status["sampled_at"] = at


def _from_usage_samples(result: dict[int, dict[str, ResourceStatus]], ids: set[int]) -> None:
    """Queues the loop has not given a status row yet: their latest usage sample per resource."""
    from kai_portal.history.models import UsageSample

    newest = (
        UsageSample.objects.filter(queue_id=OuterRef("queue_id"), resource=OuterRef("resource"))
        .order_by("-sampled_at")
        .values("sampled_at")[:1]
    )
    rows = UsageSample.objects.filter(queue_id__in=ids, sampled_at=Subquery(newest)).values(
        "queue_id", "resource", "sampled_at", *STATUS_FIELDS
    )
    for row in rows:
        _fill(result, row, row["sampled_at"])
