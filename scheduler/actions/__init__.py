"""Action registry: name -> function over a session, in KAI's default order."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.actions.allocate import allocate
from scheduler.actions.evict import consolidation, preempt, reclaim, stale_gang_eviction
from scheduler.session import Session

Action = Callable[[Session], None]


ACTIONS: dict[str, Action] = {
    "allocate": allocate,
    "consolidation": consolidation,
    "reclaim": reclaim,
    "preempt": preempt,
    "stalegangeviction": stale_gang_eviction,
}


def get_action(name: str) -> Action:
    try:
        return ACTIONS[name]
    except KeyError:
        raise ValueError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}") from None
