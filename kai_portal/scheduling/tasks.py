"""Celery tasks of the scheduling loop."""

from __future__ import annotations

from celery import shared_task

from kai_portal.history import retention
from kai_portal.scheduling.cycle import run_scheduling_cycle


@shared_task(name="kai_portal.scheduling.tasks.run_cycle", ignore_result=True, time_limit=120)
def run_cycle() -> int:
    """Run one scheduling cycle (beat sends this every CYCLE_SECONDS); returns the cycle id.

    Skips, recording a ``skipped`` cycle, when another cycle holds the lock.
    """
    return run_scheduling_cycle().pk


@shared_task(name="kai_portal.scheduling.tasks.prune_history", ignore_result=True, time_limit=1800)
def prune_history() -> int:
    """Delete scheduling history past its retention period (beat sends this daily); returns rows deleted."""
    report = retention.prune_history()
    return report.decisions + report.job_messages + report.usage_samples + report.cycles
