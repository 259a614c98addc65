"""The cycle lock: at most one scheduling cycle runs at a time, across all workers.

The lock is a redis-py ``Lock`` with an expiry (a crashed worker cannot hold it
forever) taken without blocking: a cycle that finds it taken is skipped, not
queued, because the next beat tick comes a few seconds later anyway.

When Redis cannot be reached (a laptop running ``manage.py run_scheduler``
without Redis) the lock degrades to a PostgreSQL session advisory lock, which
still excludes every other process on the same database; on SQLite, which has
no advisory locks, it degrades to a process-local lock (SQLite deployments run
one scheduler process). Each degradation is logged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

LOCK_NAME = "kai:scheduling-cycle"
# Any 64-bit number unique to this lock among the database's advisory locks.
ADVISORY_LOCK_KEY = 0x4B41495F4359434C  # "KAI_CYCL"
_process_lock = threading.Lock()


def lock_timeout_seconds() -> int:
    """How long a held lock lives if its holder dies without releasing it."""
    return int(getattr(settings, "CYCLE_LOCK_TIMEOUT_SECONDS", 120))


@contextmanager
def cycle_lock(redis_url: str | None = None) -> Iterator[bool]:
    """Yield True when this caller holds the cycle lock, False when another does.

    Never blocks: callers skip their cycle on False.
    """
    client = redis.Redis.from_url(redis_url or settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=5)
    lock = client.lock(LOCK_NAME, timeout=lock_timeout_seconds(), blocking=False)
    try:
        acquired = lock.acquire(blocking=False)
    except redis.exceptions.ConnectionError as error:
        logger.warning("Redis unreachable (%s); using the database lock for this cycle", error)
        client.close()
        with database_lock() as held:
            yield held
        return
    try:
        yield bool(acquired)
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:
                # It expired while we ran (a cycle longer than the timeout); someone
                # else may hold it now, and it is theirs to release.
                logger.warning("cycle lock expired before the cycle ended")
            except redis.exceptions.ConnectionError:
                logger.warning("Redis went away; the cycle lock will expire on its own")
        client.close()


@contextmanager
def database_lock() -> Iterator[bool]:
    """The fallback: a PostgreSQL advisory lock, or a process lock on other databases."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [ADVISORY_LOCK_KEY])
            acquired = bool(cursor.fetchone()[0])
        try:
            yield acquired
        finally:
            if acquired:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_LOCK_KEY])
        return
    acquired = _process_lock.acquire(blocking=False)
    try:
        yield acquired
    finally:
        if acquired:
            _process_lock.release()
