from __future__ import annotations

from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "kai_portal.workloads"
    verbose_name = "Workloads"
