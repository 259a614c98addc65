"""client-go's event spam filter, for the Events the backend writes.

Aggregation (one Event object per object and message, repeats bump ``count``) keeps etcd small, but
a pod pending for an hour would still cost a PATCH every cycle: 2,000 pending pods and a 5 s cycle
are 400 writes a second to the API server, forever. client-go's ``EventCorrelator`` (which KAI's
and kube-scheduler's recorders use) also rate-limits per object: a token bucket of 25 events,
refilled at one per five minutes, keyed by the source and the involved object. An event over the
limit is dropped, not queued, as there. One difference: our key adds the event's reason, so a pod
pending for hours (its Unschedulable bucket empty) still gets its Scheduled event when bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

BURST = 25  # client-go: defaultSpamBurst
REFILL_SECONDS = 300.0  # client-go: defaultSpamQPS = 1/300
KEYS_LIMIT = 10_000  # forgetting an object only gives it a fresh bucket


class EventSpamFilter:
    """Per-object token buckets: ``allow(key)`` spends a token, or says the event is dropped."""

    def __init__(
        self,
        burst: int = BURST,
        refill_seconds: float = REFILL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.clock = clock
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, when counted)
        self._lock = threading.Lock()  # events about different objects are posted from a pool

    def allow(self, key: Hashable) -> bool:
        now = self.clock()
        with self._lock:
            tokens, then = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) / self.refill_seconds)
            allowed = tokens >= 1.0 - 1e-9  # partial refills add up with rounding errors
            if allowed:
                tokens = max(0.0, tokens - 1.0)
            if len(self._buckets) >= KEYS_LIMIT and key not in self._buckets:
                self._buckets.clear()
            self._buckets[key] = (tokens, now)
            return allowed
