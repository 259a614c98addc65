"""``manage.py worker_health``: exit 0 when a cycle succeeded recently, else 1 (an exec probe)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from kai_portal.monitoring.health import DEFAULT_MAX_AGE_CYCLES, loop_health


class Command(BaseCommand):
    help = (
        "Say when the last scheduling cycle finished; exit 1 when none succeeded within "
        "--max-age-cycles x CYCLE_SECONDS (for a liveness exec probe of the Celery worker)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-age-cycles",
            type=float,
            default=DEFAULT_MAX_AGE_CYCLES,
            help=f"Cycle intervals allowed without a succeeded cycle (default {DEFAULT_MAX_AGE_CYCLES}).",
        )
        parser.add_argument(
            "--pool",
            default=None,
            help="Count only this node pool's cycles (the probe of `run_scheduler --pool NAME`, shards).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["max_age_cycles"] <= 0:
            raise CommandError("--max-age-cycles must be positive")
        health = loop_health(timezone.now(), options["max_age_cycles"], options["pool"])
        if not health.healthy:
            raise CommandError(health.message, returncode=1)
        self.stdout.write(health.message)
