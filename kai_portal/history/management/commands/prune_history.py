"""``manage.py prune_history``: delete scheduling history past its retention period."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from kai_portal.history.retention import prune_history


class Command(BaseCommand):
    help = (
        "Delete decisions and job messages older than REASON_RETENTION_DAYS, "
        "usage samples older than USAGE_RETENTION_DAYS."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = prune_history()
        self.stdout.write(
            f"pruned {report.decisions} decisions, {report.job_messages} job messages, "
            f"{report.cycles} cycles (before {report.reason_cutoff:%Y-%m-%d %H:%M}), "
            f"{report.usage_samples} usage samples (before {report.usage_cutoff:%Y-%m-%d %H:%M})"
        )
