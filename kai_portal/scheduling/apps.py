from __future__ import annotations

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "kai_portal.scheduling"
    verbose_name = "Scheduling"
