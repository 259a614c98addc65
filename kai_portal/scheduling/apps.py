from __future__ import annotations

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """The scheduling cycle: the engine adapter, its lock and the worker's tasks (no models).

    The label ``scheduling`` stays with the history models (kai_portal/history/apps.py)."""

    name = "kai_portal.scheduling"
    label = "scheduling_cycle"
    verbose_name = "Scheduling"
