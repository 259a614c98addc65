"""The scheduler process's loop in kubernetes mode: a cycle when the cluster changed (issue 29).

KAI's scheduler is one long-running process whose informers keep the cluster's objects in
memory. ``manage.py run_scheduler`` is that process for the portal: the backend's watches run in
background threads from the start (``ChangeFeed.start_watches``) and each change a cycle should
act on (a new pending pod, a pod finished or deleted, a node or queue changed) fires the
``Trigger``. The loop runs a cycle when the trigger fires, after a short quiet period so that a
burst of changes (300 pods created at once) lands in one cycle, and at least every
``CYCLE_SECONDS`` (what changes no event announces: a gang's timeout, a foreign pod bound, time
itself). Each cycle is ``run_scheduling_cycle`` as under Celery: the same cycle lock, leader Lease
and fencing token, so a Celery worker or a second scheduler process can never overlap it.

What a cycle decides depends only on what it observed (the watches' copy it reads); the trigger
and the quiet period only decide when it starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kai_portal.cluster.backends import ChangeFeed, ClusterBackend
from kai_portal.history.models import SchedulingCycle

logger = logging.getLogger(__name__)

PERIODIC = "every CYCLE_SECONDS"
# Reasons kept per cycle (a burst of 300 pods gives 300): the first few say enough.
REASONS_KEPT = 20


class Trigger:
    """Changes reported by the watch threads, waited for by the loop."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._reasons: list[str] = []
        self._count = 0
        self._first = self._last = 0.0

    def fire(self, reason: str) -> None:
        """A change a cycle should act on (called from any thread)."""
        with self._changed:
            now = time.monotonic()
            if not self._count:
                self._first = now
            self._last = now
            self._count += 1
            if len(self._reasons) < REASONS_KEPT:
                self._reasons.append(reason)
            self._changed.notify_all()

    @property
    def pending(self) -> int:
        """Changes reported and not yet taken by ``wait``."""
        with self._changed:
            return self._count

    def wait(self, timeout: float, quiet: float, longest: float) -> tuple[list[str], int]:
        """The changes since the last call (reasons kept, count), waiting up to ``timeout`` s for
        the first; once there is one, until ``quiet`` s pass with no other, or ``longest`` s since
        the first. Empty when the timeout passed with no change."""
        with self._changed:
            self._changed.wait_for(lambda: self._count > 0, timeout=max(0.0, timeout))
            while self._count:
                now = time.monotonic()
                left = min(self._last + quiet, self._first + longest) - now
                if left <= 0:
                    break
                self._changed.wait(left)
            reasons, count = self._reasons, self._count
            self._reasons, self._count = [], 0
            return reasons, count


@dataclass
class CycleStart:
    """Why one cycle of the loop started, and its record."""

    reasons: list[str]
    changes: int
    cycle: SchedulingCycle | None = None
    error: str | None = None


@dataclass
class EventLoop:
    """Cycles on change and every ``interval`` s, over a backend that is a ``ChangeFeed``."""

    backend: ClusterBackend
    interval: float
    quiet: float
    longest: float
    run_cycle: Callable[[ClusterBackend], SchedulingCycle]
    trigger: Trigger = field(default_factory=Trigger)
    stop: threading.Event = field(default_factory=threading.Event)
    # Each cycle's start, in order (kept for the tests and the log; bounded).
    starts: list[CycleStart] = field(default_factory=list)
    on_cycle: Callable[[CycleStart], None] | None = None
    # Set while the loop waits for a change (no cycle running).
    waiting: threading.Event = field(default_factory=threading.Event)

    @property
    def idle(self) -> bool:
        """Waiting, with no change reported that a cycle has not yet taken."""
        return self.waiting.is_set() and not self.trigger.pending

    def run(self, cycles: int = 0) -> None:
        """Start the watches, then run cycles until ``stop`` is set (or ``cycles`` have run)."""
        if not isinstance(self.backend, ChangeFeed):
            raise TypeError(f"{type(self.backend).__name__} cannot report changes; use the periodic loop")
        self.backend.start_watches(self.trigger.fire)
        done = 0
        reasons, changes = ["the scheduler started"], 0
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                self._one(CycleStart(reasons, changes))
                done += 1
                if cycles and done >= cycles:
                    return
                left = self.interval - (time.monotonic() - started)
                self.waiting.set()
                reasons, changes = self.trigger.wait(left, self.quiet, self.longest)
                self.waiting.clear()
                if not changes:
                    reasons = [PERIODIC]
        finally:
            self.backend.stop_watches()

    def _one(self, start: CycleStart) -> None:
        try:
            start.cycle = self.run_cycle(self.backend)
        except Exception as error:  # the cycle row has the traceback; the loop goes on
            start.error = str(error)
            logger.warning("scheduling cycle failed: %s", error)
        self.starts.append(start)
        del self.starts[:-100]
        if self.on_cycle is not None:
            self.on_cycle(start)
