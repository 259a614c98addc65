"""Action registry: name -> function over a session. Part 2 adds the eviction actions."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.actions.allocate import allocate
from scheduler.session import Session

Action = Callable[[Session], None]


def _not_implemented_yet(session: Session) -> None:
    """Placeholder for actions of part 2 (consolidation, reclaim, preempt, stale gang eviction)."""


ACTIONS: dict[str, Action] = {
    "allocate": allocate,
    "consolidation": _not_implemented_yet,
    "reclaim": _not_implemented_yet,
    "preempt": _not_implemented_yet,
    "stalegangeviction": _not_implemented_yet,
}


def get_action(name: str) -> Action:
    try:
        return ACTIONS[name]
    except KeyError:
        raise ValueError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}") from None
