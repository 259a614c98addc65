from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "kai_portal.demo"
    verbose_name = "Demo data"
