"""The reclaim action (§3.7): :mod:`.action` runs it, :mod:`.rules` declares its eviction policy,
:mod:`.gain` and :mod:`.victim_sums` prove early that it cannot help a job."""

from scheduler.actions.reclaim.action import reclaim

__all__ = ["reclaim"]
