from __future__ import annotations

from django.apps import AppConfig


class HistoryConfig(AppConfig):
    """What the scheduler did: cycles, decisions, job messages, usage samples, queue status, forecasts.

    These models were born in the ``scheduling`` app and keep its label, so their tables
    (``scheduling_*``), migration history, content types and admin URLs are unchanged by the move."""

    name = "kai_portal.history"
    label = "scheduling"
    verbose_name = "Scheduling history"
