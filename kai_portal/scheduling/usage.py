"""Queue usage: a sample per queue and resource every cycle, and the decayed history.

Samples (``UsageSample``) are the history behind charts and time-based fair
share. ``historical_usage`` turns them into KAI's normalised usage
(kai-semantics.md §2.5)::

    U'(q,r) = Σ_t A(q,r,t)·0.5^((now−t)/h) / Σ_t Cap(r,t)·0.5^((now−t)/h)

over the samples of the sliding window. Two approximations keep it cheap:
samples are averaged per minute (KAI's query resolution) in the database, and
the capacity of every past minute is taken to be today's capacity (the
samples do not record capacity). With no half-life the decay factor is 1.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Avg
from django.db.models.functions import TruncMinute

from kai_portal.history.models import QueueStatus, SchedulingCycle, UsageSample
from scheduler import QueueOutcome

RESOURCES = ("gpu", "cpu", "memory")
DEFAULT_WINDOW_HOURS = 168.0  # KAI's default sliding window: one week


def _decimal(value: float) -> Decimal:
    return Decimal(str(round(value, 2)))


def record_usage(
    cycle: SchedulingCycle, queue_ids: dict[str, int], outcomes: dict[str, QueueOutcome], now: datetime
) -> int:
    """Write one ``UsageSample`` per queue and resource, and overwrite the ``QueueStatus`` rows.

    ``outcomes`` maps queue name to the engine's ``QueueOutcome``. Returns the
    number of samples written.
    """
    samples = []
    statuses = []
    for name, outcome in outcomes.items():
        queue_id = queue_ids.get(name)
        if queue_id is None:
            continue
        for r in RESOURCES:
            numbers = {
                "deserved": _decimal(outcome.deserved.get(r, 0.0)),
                "fair_share": _decimal(outcome.fair_share.get(r, 0.0)),
                "allocated": _decimal(outcome.allocated.get(r, 0.0)),
                "allocated_non_preemptible": _decimal(outcome.allocated_non_preemptible.get(r, 0.0)),
                "requested": _decimal(outcome.requested.get(r, 0.0)),
            }
            samples.append(UsageSample(queue_id=queue_id, resource=r, sampled_at=now, cycle=cycle, **numbers))
            statuses.append(
                QueueStatus(
                    queue_id=queue_id,
                    resource=r,
                    cycle=cycle,
                    updated_at=now,
                    limit=_decimal(outcome.limit.get(r, -1.0)),
                    **numbers,
                )
            )
    UsageSample.objects.bulk_create(samples)
    QueueStatus.objects.bulk_create(
        statuses,
        update_conflicts=True,
        unique_fields=["queue", "resource"],
        update_fields=[
            "cycle",
            "updated_at",
            "deserved",
            "fair_share",
            "allocated",
            "allocated_non_preemptible",
            "requested",
            "limit",
        ],  # fmt: skip
    )
    return len(samples)


def historical_usage(
    now: datetime,
    capacity: dict[str, float],
    window_hours: float | None,
    half_life_hours: float | None,
) -> dict[str, dict[str, float]]:
    """Normalised, decayed usage per queue name and resource over the sliding window."""
    window = timedelta(hours=window_hours or DEFAULT_WINDOW_HOURS)
    per_minute = (
        UsageSample.objects.filter(sampled_at__gt=now - window, sampled_at__lte=now)
        .annotate(minute=TruncMinute("sampled_at"))
        .values("queue__name", "resource", "minute")
        .annotate(allocated=Avg("allocated"))
    )
    used: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(RESOURCES, 0.0))
    minutes: dict[datetime, float] = {}
    for row in per_minute:
        age_h = (now - row["minute"]).total_seconds() / 3600
        weight = 0.5 ** (age_h / half_life_hours) if half_life_hours else 1.0
        minutes[row["minute"]] = weight
        used[row["queue__name"]][row["resource"]] += float(row["allocated"] or 0) * weight
    total_weight = sum(minutes.values())
    out: dict[str, dict[str, float]] = {}
    for queue, amounts in used.items():
        out[queue] = {
            r: (amounts[r] / (capacity.get(r, 0.0) * total_weight))
            if capacity.get(r) and total_weight
            else 0.0
            for r in RESOURCES
        }
    return out
