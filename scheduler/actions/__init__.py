"""Action registry: name -> function over a session, in KAI's default order.

One module (or package) per action, as KAI's ``pkg/scheduler/actions/<action>``: :mod:`.allocate`,
:mod:`.consolidation`, :mod:`.reclaim`, :mod:`.preempt`, :mod:`.stale_gang_eviction`. The victim
search the eviction actions share is in :mod:`.solvers` (start at :mod:`.solvers.loop`), the
pieces they share besides it in :mod:`.common`. The functions are imported under other names, so
that ``scheduler.actions.<name>`` stays the module.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.actions.allocate import allocate as _allocate
from scheduler.actions.consolidation import consolidation as _consolidation
from scheduler.actions.preempt import preempt as _preempt
from scheduler.actions.reclaim import reclaim as _reclaim
from scheduler.actions.stale_gang_eviction import stale_gang_eviction as _stale_gang_eviction
from scheduler.session import Session

Action = Callable[[Session], None]


ACTIONS: dict[str, Action] = {
    "allocate": _allocate,
    "consolidation": _consolidation,
    "reclaim": _reclaim,
    "preempt": _preempt,
    "stalegangeviction": _stale_gang_eviction,
}


def get_action(name: str) -> Action:
    try:
        return ACTIONS[name]
    except KeyError:
        raise ValueError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}") from None
