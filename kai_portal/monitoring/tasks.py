"""Celery tasks of monitoring: reading GPU use from Prometheus (beat sends it while PROMETHEUS_URL is set)."""

from __future__ import annotations

from celery import shared_task

from kai_portal.monitoring import gpu_use


@shared_task(name="kai_portal.monitoring.tasks.read_gpu_use", ignore_result=True, time_limit=120)
def read_gpu_use() -> str:
    """Read each GPU job's DCGM utilisation and memory; returns the outcome (``ok`` or why not)."""
    if not gpu_use.enabled():
        return "off"
    return gpu_use.read_gpu_use().outcome
