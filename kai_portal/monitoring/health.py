"""Health of the web process (readiness) and of the scheduling loop (the worker's probe)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.db import connections

from kai_portal.history.models import SchedulingCycle

logger = logging.getLogger(__name__)

# The worker is unhealthy once no cycle has succeeded for this many cycle intervals.
DEFAULT_MAX_AGE_CYCLES = 6


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    error: str = ""


def readiness_checks() -> list[Check]:
    """Every database (required), and Redis (reported, never required).

    The web serves every page and API call without Redis: the cache degrades to misses
    (``core/cache.py``), forecasts are stored rows, and the cycle lock falls back to a database
    lock. Taking web pods out of rotation for a Redis outage would turn a degraded service into
    none, so Redis shows in the body as ``degraded`` instead.
    """
    checks = []
    for alias in connections:
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT 1")
            checks.append(Check(f"database:{alias}", True))
        except Exception as error:  # any driver error means "not ready"
            logger.warning("readiness: database %s unreachable: %s", alias, error)
            checks.append(Check(f"database:{alias}", False, type(error).__name__))
    try:
        # Closed after each probe: a probe every few seconds must not pile up connections.
        with redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=1) as probe:
            probe.ping()
        checks.append(Check("redis", True))
    except redis.RedisError as error:
        logger.warning("readiness: redis unreachable (serving degraded): %s", error)
        checks.append(Check("redis", True, f"degraded: {type(error).__name__}"))
    return checks


@dataclass(frozen=True)
class LoopHealth:
    """When the last cycle succeeded, and whether that is recent enough."""

    healthy: bool
    last_finished: datetime | None
    age_seconds: float | None
    max_age_seconds: float
    message: str


def last_succeeded_cycle(pool: str | None = None) -> tuple[datetime, int] | None:
    """``(finished_at, duration_ms)`` of the newest succeeded cycle (of node pool ``pool``'s
    shard when given; None: any cycle).

    The cycle record's ``finished_at`` is its simulated-clock start; the wall
    time it finished is ``started_at`` + its duration.
    """
    cycles = SchedulingCycle.objects.filter(status=SchedulingCycle.Status.SUCCEEDED)
    if pool is not None:
        cycles = cycles.filter(pool=pool)
    row = (
        cycles.order_by("-started_at")
        .values_list("started_at", "duration_ms")
        .first()
    )
    if row is None:
        return None
    started, duration_ms = row
    return started + timedelta(milliseconds=duration_ms or 0), duration_ms or 0


def loop_health(
    now: datetime, max_age_cycles: float = DEFAULT_MAX_AGE_CYCLES, pool: str | None = None
) -> LoopHealth:
    """Healthy when a cycle succeeded within ``max_age_cycles`` × ``CYCLE_SECONDS``.

    Skipped and failed cycles do not count: a cycle stuck holding the lock
    makes every later one skip, and a loop that fails every time is not
    scheduling anything. ``pool``: only that node pool's cycles count (a shard's
    scheduler must not be kept alive by another pool's cycles).
    """
    max_age = max_age_cycles * settings.CYCLE_SECONDS
    of = "" if pool is None else f" of pool {pool}"
    last = last_succeeded_cycle(pool)
    if last is None:
        return LoopHealth(False, None, None, max_age, f"no scheduling cycle{of} has succeeded yet")
    finished = last[0]
    age = (now - finished).total_seconds()
    healthy = age <= max_age
    verdict = "ok" if healthy else f"stale: older than {max_age:g} s"
    message = f"last cycle{of} finished at {finished.isoformat()} ({age:.0f} s ago): {verdict}"
    return LoopHealth(healthy, finished, age, max_age, message)
