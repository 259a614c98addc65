"""The cycle lock: at most one scheduling cycle runs at a time, across all workers.

With shards (``SCHEDULING_SHARDS``, issue 30) each node pool has a lock of its own
(``lock_name(pool)``): at most one cycle per pool at a time, and a pool's lock never stops
another pool's cycle. The whole-cluster cycle (no pool) keeps ``LOCK_NAME``.

The lock is a redis-py ``Lock`` with a short expiry (``CYCLE_LOCK_TIMEOUT_SECONDS``,
10 s) that a heartbeat thread renews every third of it while the cycle runs: a
cycle may take as long as it needs, and a worker killed mid-cycle (SIGKILL, OOM,
a lost node) stops renewing, so the next cycle runs at most one expiry later. It
is taken without blocking: a cycle that finds it taken is skipped, not queued,
because the next beat tick comes a few seconds later anyway.

When Redis cannot be reached (a laptop running ``manage.py run_scheduler``
without Redis) the lock degrades to a PostgreSQL session advisory lock, which
still excludes every other process on the same database; on SQLite, which has
no advisory locks, it degrades to a process-local lock (SQLite deployments run
one scheduler process). Each degradation is logged.

The lock alone cannot stop a cycle that lost it (Redis restarted under it) from carrying on while
the next one starts: the cycle checks ``HeldLock.lost()`` and its fencing token (fencing.py)
before it applies or persists anything.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from django.db import connection
from redis.lock import Lock

logger = logging.getLogger(__name__)

LOCK_NAME = "kai:scheduling-cycle"
# Any 64-bit number unique to this lock among the database's advisory locks.
ADVISORY_LOCK_KEY = 0x4B41495F4359434C  # "KAI_CYCL"
_process_locks: dict[str, threading.Lock] = {}
_process_locks_guard = threading.Lock()
# CycleFence.name is 64 characters; a pool name may be 253 (a label value).
_NAME_LIMIT = 64


def lock_name(pool: str | None = None) -> str:
    """The lock (and fencing token) name of the whole-cluster cycle (None) or of one pool's cycle.

    A long pool name is cut and given a digest of the whole name, so two pools never share one."""
    if pool is None:
        return LOCK_NAME
    name = f"{LOCK_NAME}:{pool}"
    if len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(pool.encode()).hexdigest()[:16]
    return f"{name[: _NAME_LIMIT - 17]}#{digest}"


def _advisory_key(name: str) -> int:
    """The advisory-lock key of a lock name: ``ADVISORY_LOCK_KEY`` for the whole cluster, else a
    signed 64-bit digest of the name."""
    if name == LOCK_NAME:
        return ADVISORY_LOCK_KEY
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _process_lock(name: str) -> threading.Lock:
    with _process_locks_guard:
        return _process_locks.setdefault(name, threading.Lock())


def lock_timeout_seconds() -> float:
    """How long a held lock lives after its holder's last renewal (if it dies, say)."""
    return float(settings.CYCLE_LOCK_TIMEOUT_SECONDS)


class _Heartbeat(threading.Thread):
    """Extends the lock's expiry every third of it until stopped (or the lock is lost)."""

    def __init__(self, lock: Lock, timeout: float) -> None:
        super().__init__(name="cycle-lock-heartbeat", daemon=True)
        self.lock, self.timeout, self.stopped = lock, timeout, threading.Event()
        self.lost = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.timeout / 3):
            try:
                self.lock.extend(self.timeout, replace_ttl=True)
            except redis.exceptions.LockError:
                logger.error("cycle lock lost while the cycle runs (it expired); another cycle may start")
                self.lost.set()
                return
            except redis.exceptions.RedisError as error:
                logger.warning("cannot renew the cycle lock (%s); retrying", error)

    def stop(self) -> None:
        self.stopped.set()
        self.join(5)


class HeldLock:
    """What ``cycle_lock`` yields: true when this caller holds the lock, and whether it still does."""

    def __init__(self, acquired: bool, lock: Lock | None = None, heartbeat: _Heartbeat | None = None) -> None:
        self.acquired, self._lock, self._heartbeat = acquired, lock, heartbeat

    def __bool__(self) -> bool:
        return self.acquired

    def lost(self) -> str | None:
        """Why this holder's Redis lock is gone (None: still held, or not a Redis lock).

        When Redis cannot be asked, None: the fencing token in the database decides then.
        """
        if self._lock is None:
            return None  # the database fallback: held as long as this process's connection lives
        if self._heartbeat is not None and self._heartbeat.lost.is_set():
            return "its Redis lock expired or was lost (Redis restarted?) while it ran"
        try:
            if not self._lock.owned():
                return "its Redis lock is gone or another cycle's (Redis restarted, or the lock expired)"
        except redis.exceptions.RedisError:
            return None
        return None


@contextmanager
def cycle_lock(redis_url: str | None = None, pool: str | None = None) -> Iterator[HeldLock]:
    """Yield a ``HeldLock``: true when this caller holds the cycle lock (``pool``'s, or the whole
    cluster's), false when another does.

    Never blocks: callers skip their cycle on false.
    """
    name = lock_name(pool)
    client = redis.Redis.from_url(redis_url or settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=5)
    timeout = lock_timeout_seconds()
    # Not thread-local: the heartbeat thread renews the lock with the token this thread took.
    lock = client.lock(name, timeout=timeout, blocking=False, thread_local=False)
    try:
        acquired = lock.acquire(blocking=False)
    except redis.exceptions.ConnectionError as error:
        logger.warning("Redis unreachable (%s); using the database lock for this cycle", error)
        client.close()
        with database_lock(name) as held:
            yield HeldLock(held)
        return
    heartbeat = _Heartbeat(lock, timeout) if acquired else None
    if heartbeat is not None:
        heartbeat.start()
    try:
        yield HeldLock(bool(acquired), lock if acquired else None, heartbeat)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
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
def database_lock(name: str = LOCK_NAME) -> Iterator[bool]:
    """The fallback: a PostgreSQL advisory lock, or a process lock on other databases."""
    key = _advisory_key(name)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            acquired = bool(cursor.fetchone()[0])
        try:
            yield acquired
        finally:
            if acquired:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return
    process_lock = _process_lock(name)
    acquired = process_lock.acquire(blocking=False)
    try:
        yield acquired
    finally:
        if acquired:
            process_lock.release()
