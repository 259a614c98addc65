"""One scheduling cycle: lock, lease, observe and sync, snapshot, engine, apply, persist.

In kubernetes mode the cycle also needs the leader's Lease (cluster/leader_election.py), next to
the cycle lock: a replica that does not hold it records a skipped cycle with the reason.

``run_scheduling_cycle`` is what the Celery task and ``manage.py run_scheduler``
call. It takes the clock as an argument so tests drive simulated time.

Transactions: observing (and, for the simulated cluster, moving time on) is
one transaction; applying the result and persisting it is another, so a cycle
that raises while applying or persisting leaves no half-written decisions,
pod states or usage. The cycle record itself is written outside both, so a
failed cycle still says that it failed and why.

Fencing (issue 26): the cycle takes a fencing token once it runs, and both
transactions that write start by checking it, and that its Redis lock is still
its own (fencing.py). A cycle that lost the lock (Redis restarted under it) and
may have been overtaken by the next one applies nothing to the cluster, rolls
back, and is recorded ``aborted`` with the reason.

Shards (issue 30, ``SCHEDULING_SHARDS``): ``run_scheduling_cycle(pool=...)`` is one node pool's
cycle. It takes that pool's lock and fencing token (``lock.lock_name``), observes and snapshots
that pool only, and writes only that pool's rows, so pools' cycles run side by side; its record
carries the pool. What stays shared is in docs/decisions/shards.md. In kubernetes mode the
backend is that pool's own (its watches and its Lease, ``<lease>-<pool>``), scoped to the pool:
it observes the pool's share and binds and evicts on the pool's nodes only.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import scheduler
from kai_portal.cluster.backends import ClusterBackend, LeaseHolder
from kai_portal.cluster.leader_election import leadership
from kai_portal.cluster.queue_sync import sync_queue_objects
from kai_portal.cluster.sync import sync_cluster_state
from kai_portal.history.models import SchedulingCycle
from kai_portal.monitoring.recording import record_cycle
from kai_portal.queues.models import Queue
from kai_portal.scheduling import fencing
from kai_portal.scheduling.lock import HeldLock, cycle_lock, lock_name
from kai_portal.scheduling.results import cluster_operations, persist_result
from kai_portal.scheduling.signals import cycle_finished
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.workloads import lifecycle
from kai_portal.workloads.configured_backend import get_backend
from kai_portal.workloads.models import Job

logger = logging.getLogger(__name__)


@runtime_checkable
class PoolScoped(Protocol):
    """A backend that can observe one node pool only (the simulated rows' ``RowBackend``, the
    Kubernetes backend); ``queue_pools`` (queue name -> pool) places pods by their queue."""

    def scope_to_pool(self, pool: str, queue_pools: Mapping[str, str] | None = None) -> None: ...


def run_scheduling_cycle(
    *, now: datetime | None = None, backend: ClusterBackend | None = None, pool: str | None = None
) -> SchedulingCycle:
    """Run one cycle unless another is running; return its record (status ``skipped`` if so).

    ``pool``: that node pool's cycle (its shard), under its own lock; None: the whole cluster.
    Raises whatever the cycle raised, after recording it on the cycle row.
    """
    now = now or timezone.now()
    with cycle_lock(pool=pool) as held:
        if not held:
            logger.info("scheduling cycle%s skipped: another cycle holds the lock", _of(pool))
            return _skipped(now, pool=pool)
        backend = backend or get_backend(clock=lambda: now, pool=pool)
        if pool is not None and not isinstance(backend, PoolScoped):
            raise ValueError(f"a cycle of pool {pool!r} needs a backend that observes one pool (PoolScoped)")
        if pool is not None and isinstance(backend, PoolScoped):
            backend.scope_to_pool(pool)  # before the Lease: a pool's backend runs for its pool's Lease
        with _leadership(backend) as refusal:
            if refusal:
                logger.info("scheduling cycle%s skipped: %s", _of(pool), refusal)
                return _skipped(now, refusal, pool)
            cycle = _run_locked(now, backend, held, pool)
            # Post-cycle hook (the forecast refresh in kai_portal/previews), still under the
            # lock so two refreshes never overlap.
            cycle_finished.send(sender=run_scheduling_cycle, cycle=cycle, now=now)
            return cycle


def _leadership(backend: ClusterBackend) -> AbstractContextManager[str | None]:
    """The Lease a lease-holding (Kubernetes) backend's cycle needs (None: go ahead); nothing for others."""
    if not isinstance(backend, LeaseHolder):
        return nullcontext(None)
    return leadership(backend)


def _of(pool: str | None) -> str:
    return "" if pool is None else f" of pool {pool}"


def _skipped(now: datetime, reason: str = "", pool: str | None = None) -> SchedulingCycle:
    skipped = SchedulingCycle.objects.create(
        started_at=now, finished_at=now, duration_ms=0, status=SchedulingCycle.Status.SKIPPED, error=reason,
        pool=pool or "",
    )  # fmt: skip
    record_cycle(skipped)
    return skipped


def _run_locked(now: datetime, backend: ClusterBackend, held: HeldLock, pool: str | None) -> SchedulingCycle:
    started = time.monotonic()
    reap_abandoned_cycles(now, pool)
    cycle = SchedulingCycle.objects.create(
        started_at=now, status=SchedulingCycle.Status.RUNNING, pool=pool or ""
    )
    fence = lock_name(pool)
    try:
        token = fencing.take_token(fence, cycle.pk)
        unsynced_events = []  # pods that got no rows (QueueDoesNotExist)
        if backend.capabilities.rows_are_the_cluster:
            backend.observe()
        else:
            sync_queue_objects(backend, now, pool)  # KAI's Queue objects first: pods may name a new queue
            if pool is not None and isinstance(backend, PoolScoped):
                backend.scope_to_pool(pool, _queue_pools())  # a pending pod's pool is its queue's
            state = backend.observe()
            with transaction.atomic():
                _still_the_holder(held, fence, token)  # an overtaken cycle must not write older observations
                unsynced_events = sync_cluster_state(state, now, pool)
        inp = build_snapshot(now, pool)
        _fail_unhandled_jobs(inp.index.unhandled, now)
        # The result's reasons are worded where they are written, with the cluster's own names
        # (``SnapshotIndex.text``).
        result = scheduler.run_cycle(inp.snapshot, inp.config)
        ops = cluster_operations(inp, result)
        _test_pause()
        with transaction.atomic():
            # First, before the cluster sees a bind or eviction: from here to the commit no newer
            # cycle can take a token (the fence row stays locked), so the check holds to the end.
            _still_the_holder(held, fence, token)
            lifecycle.lock_jobs(ref.job_id for ref in inp.index.jobs.values())  # jobs before pods
            report = backend.apply(ops.binds, ops.evictions, ops.events + unsynced_events)
            cycle.duration_ms = int((time.monotonic() - started) * 1000)
            cycle.finished_at = _finished(now, cycle.duration_ms)
            persist_result(cycle, inp, result, report, now)
            record_cycle(cycle)  # the /metrics totals commit with the decisions
    except fencing.LockLost as lost:
        return _aborted(cycle, started, now, str(lost))
    except Exception:
        cycle.status = SchedulingCycle.Status.FAILED
        cycle.duration_ms = int((time.monotonic() - started) * 1000)
        SchedulingCycle.objects.filter(pk=cycle.pk).update(
            status=cycle.status,
            finished_at=_finished(now, cycle.duration_ms),
            duration_ms=cycle.duration_ms,
            error=traceback.format_exc()[-8000:],
        )
        record_cycle(cycle)
        logger.exception("scheduling cycle %s%s failed", cycle.pk, _of(pool))
        raise
    for failure in report.failures:
        logger.warning("cluster %s of %s/%s failed: %s", failure.operation, failure.namespace, failure.name,
                       failure.error)  # fmt: skip
    return cycle


def _queue_pools() -> dict[str, str]:
    """Every queue's node pool, by queue name (read only; a pool's share of the cluster uses it)."""
    return dict(Queue.objects.values_list("name", "node_pool__name"))


def _still_the_holder(held: HeldLock, fence: str, token: int) -> None:
    """Raise ``fencing.LockLost`` unless this cycle still holds the newest token and its lock.

    The token first: its check locks the fence row until the caller's transaction ends.
    """
    fencing.check_token(fence, token)
    why = held.lost()
    if why:
        raise fencing.LockLost(why)


ABORTED = (
    "Aborted: this cycle lost the cycle lock: {why}. It sent no bind, eviction or event to the "
    "cluster and persisted nothing; the next cycle plans again from the current state."
)


def _aborted(cycle: SchedulingCycle, started: float, now: datetime, why: str) -> SchedulingCycle:
    """Record a cycle that stopped short of applying because it lost the lock (not an error of its own)."""
    cycle.status = SchedulingCycle.Status.ABORTED
    cycle.duration_ms = int((time.monotonic() - started) * 1000)
    cycle.finished_at = _finished(now, cycle.duration_ms)
    cycle.error = ABORTED.format(why=why)
    # The whole row: a newer cycle may have marked it abandoned meanwhile (reap_abandoned_cycles).
    cycle.save()
    record_cycle(cycle)
    logger.warning("scheduling cycle %s aborted: %s", cycle.pk, why)
    return cycle


def _test_pause() -> None:
    """Sleep between plan and persist when the test settings ask for it (never in production
    settings): the fencing test restarts Redis and starts another cycle in that window."""
    pause = settings.CYCLE_TEST_PAUSE_SECONDS
    if pause:
        time.sleep(pause)


def _finished(now: datetime, elapsed_ms: int) -> datetime:
    """The cycle's end on the cycle's clock (``now`` may be simulated time in tests)."""
    return now + timedelta(milliseconds=elapsed_ms)


ABANDONED = "Abandoned: the worker running this cycle stopped (killed or crashed) before it finished."


def reap_abandoned_cycles(now: datetime, pool: str | None = None) -> int:
    """Mark cycle rows still ``running`` as failed. Called with the cycle lock held, so no
    cycle is running: such a row was left by a worker that died mid-cycle.

    Only rows of the same lock (``pool``'s, or the whole cluster's): another pool's cycle may be
    running now."""
    running = SchedulingCycle.objects.filter(status=SchedulingCycle.Status.RUNNING, pool=pool or "")
    reaped = running.update(status=SchedulingCycle.Status.FAILED, finished_at=now, error=ABANDONED)
    if reaped:
        logger.warning("marked %d abandoned scheduling cycle(s) as failed", reaped)
    return reaped


def _fail_unhandled_jobs(unhandled: dict[int, str], now: datetime) -> None:
    """Fail each job the snapshot could not convert, with the reason on the job (its owner sees it)."""
    for job in Job.objects.filter(pk__in=list(unhandled)):
        logger.warning("failing job %s (%s): %s", job.pk, job.name, unhandled[job.pk])
        lifecycle.fail_job(job, lifecycle.unhandled_message(unhandled[job.pk]), now)
