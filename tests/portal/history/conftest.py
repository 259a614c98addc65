"""Fixtures for the retention tests: the scheduling loop's simulated clock."""

from __future__ import annotations

from tests.portal.scheduling.conftest import T0, Loop, at, free_cycle_lock, loop

__all__ = ["T0", "Loop", "at", "free_cycle_lock", "loop"]
