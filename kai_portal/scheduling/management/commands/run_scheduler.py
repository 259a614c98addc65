"""``manage.py run_scheduler``: the scheduling loop in this process, no Celery needed.

In kubernetes mode this is the scheduler process (KAI's scheduler binary; issue 29): the
backend's watches stay open in background threads and a cycle starts when the cluster changed
(a new pending pod, a pod finished or deleted, a node or queue changed), after a quiet period of
``CYCLE_DEBOUNCE_MS`` (at most ``CYCLE_DEBOUNCE_MAX_MS``), and at least every ``CYCLE_SECONDS``
(event_loop.py). Every cycle takes the same cycle lock, leader Lease and fencing token as a Celery
worker's. With the simulated cluster, or ``--poll``, it runs a cycle every ``CYCLE_SECONDS``.

With ``SCHEDULING_SHARDS`` it runs one loop per node pool, each in its own thread with its own
database connection: a pool's cycles under its own lock, never waiting for another pool's. The
pools are ``--pool NAME`` (repeatable: KAI's one scheduler per ``SchedulingShard``, the chart's
``scheduler.pools``), else those read at start (the portal's pools with a node or queue, and in
kubernetes mode every pool the cluster's nodes and Queue objects name). In kubernetes mode each
pool's loop has its own backend, scoped to the pool, with its own watches and its own Lease
(``<lease>-<pool>``) and starts a cycle on its watches' changes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from kai_portal.cluster.backends import ChangeFeed, ClusterBackend
from kai_portal.cluster.shard_pools import cluster_pools
from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.event_loop import CycleStart, EventLoop
from kai_portal.scheduling.tasks import shard_pools
from kai_portal.workloads.configured_backend import get_backend


class Command(BaseCommand):
    help = (
        "Run the scheduling loop in this process (the alternative to Celery beat + worker; in kubernetes "
        "mode, a cycle on each change the watches report and at least every CYCLE_SECONDS)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one cycle and exit.")
        parser.add_argument("--cycles", type=int, default=0, help="Stop after this many cycles (0 = never).")
        parser.add_argument("--interval", type=float, default=None, help="Seconds between cycles.")
        parser.add_argument(
            "--poll", action="store_true",
            help="A cycle every CYCLE_SECONDS and nothing else, also in kubernetes mode (the loop before "
                 "issue 29, whose cycles open watch windows; the reference of benchmarks/kwok_latency.py).",
        )  # fmt: skip
        parser.add_argument(
            "--pool", action="append", default=[], metavar="NAME",
            help="Schedule only this node pool (repeatable; needs SCHEDULING_SHARDS=1): one scheduler per "
                 "pool, as KAI's SchedulingShard, each under its own lock and, in kubernetes mode, its own "
                 "Lease. Without it, every pool (SCHEDULING_SHARDS=1) or the whole cluster.",
        )  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"] or float(settings.CYCLE_SECONDS)
        limit = 1 if options["once"] else options["cycles"]
        pools: list[str] = options["pool"]
        if pools and not settings.SCHEDULING_SHARDS:
            raise CommandError(
                "--pool needs SCHEDULING_SHARDS=1: a pool's scheduler beside a whole-cluster one would bind "
                "the same pods. Set SCHEDULING_SHARDS=1 for every scheduler, or drop --pool."
            )
        on_change = settings.CLUSTER_BACKEND == "kubernetes" and not options.get("poll")
        if settings.SCHEDULING_SHARDS:
            self._shards(pools or self._all_pools(), interval, limit, on_change)
            return
        if on_change:
            backend = get_backend()
            if isinstance(backend, ChangeFeed):
                self._on_change(backend, interval, limit)
                return
        self._poll(interval, limit)

    def _all_pools(self) -> list[str]:
        """The pools with a node or queue row; in kubernetes mode also those the cluster names."""
        pools = set(shard_pools())
        if settings.CLUSTER_BACKEND == "kubernetes":
            pools |= cluster_pools(get_backend())
        if not pools:
            raise CommandError("no node pool to schedule: the portal and the cluster have none yet")
        return sorted(pools)

    def _shards(self, pools: list[str], interval: float, limit: int, on_change: bool) -> None:
        """One loop per node pool, side by side: a slow or failing pool delays only its own."""
        self.stdout.write(f"scheduling node pool(s) {', '.join(pools)}, each on its own")
        threads = [
            threading.Thread(
                target=self._pool_loop,
                args=(pool, interval, limit, on_change),
                name=f"cycle-{pool}",
                daemon=True,
            )
            for pool in pools
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _pool_loop(self, pool: str, interval: float, limit: int, on_change: bool) -> None:
        if on_change:
            backend = get_backend(pool=pool)
            if isinstance(backend, ChangeFeed):
                try:
                    self._on_change(backend, interval, limit, pool)
                finally:
                    connection.close()  # this thread's own
                return
        self._poll(interval, limit, pool)

    def _on_change(
        self, backend: ClusterBackend, interval: float, limit: int, pool: str | None = None
    ) -> None:
        loop = EventLoop(
            backend,
            interval=interval,
            quiet=settings.CYCLE_DEBOUNCE_MS / 1000,
            longest=settings.CYCLE_DEBOUNCE_MAX_MS / 1000,
            run_cycle=lambda b: run_scheduling_cycle(backend=b, pool=pool),
            on_cycle=self._report_start,
        )
        loop.run(cycles=limit)

    def _report_start(self, start: CycleStart) -> None:
        if start.cycle is None:
            self.stderr.write(f"cycle failed: {start.error}")
            return
        more = f" (+{start.changes - len(start.reasons)} more)" if start.changes > len(start.reasons) else ""
        self._report(start.cycle, f"; after: {', '.join(start.reasons[:3])}{more}")

    def _poll(self, interval: float, limit: int, pool: str | None = None) -> None:
        done = 0
        try:
            while True:
                started = time.monotonic()
                try:
                    self._report(run_scheduling_cycle(pool=pool))
                except Exception as error:  # keep the loop alive; the cycle row has the traceback
                    self.stderr.write(f"cycle{'' if pool is None else f' of pool {pool}'} failed: {error}")
                done += 1
                if limit and done >= limit:
                    return
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            if pool is not None:
                connection.close()  # this thread's own

    def _report(self, cycle: SchedulingCycle, why: str = "") -> None:
        self.stdout.write(
            f"cycle {cycle.pk}{f' ({cycle.pool})' if cycle.pool else ''} {cycle.status}: "
            f"{cycle.allocated_count} allocated, "
            f"{cycle.evicted_count} evicted, {cycle.unschedulable_count} pending "
            f"({cycle.duration_ms} ms){why}"
        )
