"""Celery tasks of the scheduling loop."""

from __future__ import annotations

from celery import shared_task

from kai_portal.scheduling.cycle import run_scheduling_cycle


@shared_task(name="kai_portal.scheduling.tasks.run_cycle", ignore_result=True, time_limit=120)
def run_cycle() -> int:
    """Run one scheduling cycle (beat sends this every CYCLE_SECONDS); returns the cycle id.

    Skips, recording a ``skipped`` cycle, when another cycle holds the lock.
    """
    return run_scheduling_cycle().pk
