"""Celery tasks of the scheduling loop."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db.models import Q

from kai_portal.history import retention
from kai_portal.nodes.models import NodePool
from kai_portal.scheduling.cycle import run_scheduling_cycle


@shared_task(name="kai_portal.scheduling.tasks.run_cycle", ignore_result=True, time_limit=120)
def run_cycle(pool: str | None = None) -> int:
    """Run one scheduling cycle (beat sends this every CYCLE_SECONDS); returns the cycle id.

    ``pool``: that node pool's cycle only, under its own lock (shards, ``run_pool_cycles``).
    Skips, recording a ``skipped`` cycle, when another cycle holds the (same) lock. Idempotent: a
    repeat plans again from the rows.
    """
    return run_scheduling_cycle(pool=pool).pk


def shard_pools() -> list[str]:
    """The node pools that get a cycle of their own: those with a node or a queue."""
    pools = NodePool.objects.filter(Q(nodes__isnull=False) | Q(queues__isnull=False)).distinct()
    return sorted(pools.values_list("name", flat=True))


@shared_task(name="kai_portal.scheduling.tasks.run_pool_cycles", ignore_result=True, time_limit=30)
def run_pool_cycles() -> list[str]:
    """Send one ``run_cycle(pool)`` per node pool to the scheduling queue (beat's tick with
    ``SCHEDULING_SHARDS``); returns the pools. Each expires after a period: a pool whose worker
    is busy (a slow cycle) skips that tick instead of piling up, and never holds up another pool."""
    pools = shard_pools()
    for pool in pools:
        run_cycle.apply_async(
            kwargs={"pool": pool}, queue="scheduling", expires=float(settings.CYCLE_SECONDS)
        )
    return pools


@shared_task(name="kai_portal.scheduling.tasks.prune_history", ignore_result=True, time_limit=1800)
def prune_history() -> int:
    """Delete scheduling history past its retention period (beat sends this daily); returns rows deleted."""
    report = retention.prune_history()
    return report.decisions + report.job_messages + report.usage_samples + report.cycles
