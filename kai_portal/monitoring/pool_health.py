"""Each node pool's cycle health, when pools are scheduled as shards (``SCHEDULING_SHARDS``).

One pool's cycle failing or falling behind must show as that pool's, not hide among the others':
the cluster overview and ``/metrics`` read it per pool from the cycle records (``SchedulingCycle.pool``),
a few indexed queries per pool (index ``cycle_pool_started``), at request or scrape time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from kai_portal.history.models import SchedulingCycle

RAN = (SchedulingCycle.Status.SUCCEEDED, SchedulingCycle.Status.FAILED, SchedulingCycle.Status.ABORTED)
RECENT = timedelta(hours=1)


@dataclass(frozen=True)
class PoolHealth:
    """One pool's cycles: the newest that ran, the newest that succeeded, and recent failures."""

    pool: str
    last_status: str
    last_started_at: datetime
    last_duration_ms: int | None
    last_error: str  # the first line of the newest failure's error, when the newest cycle failed
    last_succeeded_at: datetime | None  # when the newest succeeded cycle finished
    failed_last_hour: int
    stale: bool  # no succeeded cycle within three cycle periods

    @property
    def last_duration_s(self) -> float | None:
        return None if self.last_duration_ms is None else self.last_duration_ms / 1000


def pool_health(now: datetime) -> list[PoolHealth]:
    """The health of every pool that has had a cycle of its own, by pool name."""
    pools = sorted(set(SchedulingCycle.objects.exclude(pool="").values_list("pool", flat=True).distinct()))
    stale_after = timedelta(seconds=settings.CYCLE_SECONDS * 3)
    out = []
    for pool in pools:
        cycles = SchedulingCycle.objects.filter(pool=pool).order_by("-started_at")
        last = cycles.filter(status__in=RAN).values("status", "started_at", "duration_ms", "error").first()
        ok = (
            cycles.filter(status=SchedulingCycle.Status.SUCCEEDED).values("started_at", "duration_ms").first()
        )
        if last is None:
            continue  # only skipped so far: it shows once a cycle of it runs
        succeeded = ok["started_at"] + timedelta(milliseconds=ok["duration_ms"] or 0) if ok else None
        failed = last["status"] == SchedulingCycle.Status.FAILED
        out.append(
            PoolHealth(
                pool=pool,
                last_status=last["status"],
                last_started_at=last["started_at"],
                last_duration_ms=last["duration_ms"],
                last_error=_first_line(last["error"]) if failed else "",
                last_succeeded_at=succeeded,
                failed_last_hour=cycles.filter(
                    status=SchedulingCycle.Status.FAILED, started_at__gte=now - RECENT
                ).count(),
                stale=succeeded is None or now - succeeded > stale_after,
            )
        )
    return out


def _first_line(error: str) -> str:
    """The exception's own line of a stored traceback (its last non-empty line)."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
