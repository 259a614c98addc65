"""``manage.py run_scheduler``: the scheduling loop in this process, no Celery needed."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from kai_portal.scheduling.cycle import run_scheduling_cycle


class Command(BaseCommand):
    help = "Run a scheduling cycle every CYCLE_SECONDS (the in-process alternative to Celery beat + worker)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one cycle and exit.")
        parser.add_argument("--cycles", type=int, default=0, help="Stop after this many cycles (0 = never).")
        parser.add_argument("--interval", type=float, default=None, help="Seconds between cycles.")
        parser.add_argument(
            "--poll", action="store_true",
            help="A cycle every CYCLE_SECONDS and nothing else (the loop before issue 29; the reference "
                 "of benchmarks/kwok_latency.py).",
        )  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"] or float(settings.CYCLE_SECONDS)
        limit = 1 if options["once"] else options["cycles"]
        done = 0
        while True:
            started = time.monotonic()
            try:
                cycle = run_scheduling_cycle()
                self.stdout.write(
                    f"cycle {cycle.pk} {cycle.status}: {cycle.allocated_count} allocated, "
                    f"{cycle.evicted_count} evicted, {cycle.unschedulable_count} pending "
                    f"({cycle.duration_ms} ms)"
                )
            except Exception as error:  # keep the loop alive; the cycle row has the traceback
                self.stderr.write(f"cycle failed: {error}")
            done += 1
            if limit and done >= limit:
                return
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
