"""Fixtures for the forecast, what-if and fit check tests: the scheduling loop's simulated clock,
the cycle lock freed, and the what-if tests' personas."""

from __future__ import annotations

from tests.portal.previews.whatif_people import people
from tests.portal.scheduling.conftest import T0, Loop, at, free_cycle_lock, loop

__all__ = ["T0", "Loop", "at", "free_cycle_lock", "loop", "people"]
