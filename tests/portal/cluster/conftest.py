"""The scheduling loop's fixtures serve the cluster tests too."""

from __future__ import annotations

from tests.portal.scheduling.conftest import free_cycle_lock, loop

__all__ = ["free_cycle_lock", "loop"]
