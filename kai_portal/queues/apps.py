from __future__ import annotations

from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "kai_portal.queues"
    verbose_name = "Queues"
