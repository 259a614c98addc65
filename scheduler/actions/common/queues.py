"""Queue arithmetic the eviction rules share: a step's request, and where two queues' paths part."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.model import RESOURCES, Task, clean
from scheduler.session import Session
from scheduler.state import QueueState


def request_of(session: Session, tasks: Sequence[Task]) -> dict[str, float]:
    """What the pending tasks ask for, as their queue is charged for it."""
    total = dict.fromkeys(RESOURCES, 0.0)
    for t in tasks:
        for r, v in session.pending_request(t).items():
            total[r] = clean(total[r] + v)
    return total


def diverging(session: Session, a: str, b: str) -> tuple[QueueState, QueueState]:
    """The two queues where the root paths of leaf queues ``a`` and ``b`` part (KAI's
    ``getLeveledQueues`` in the proportion plugin's reclaimable)."""
    pa = list(reversed(session.ancestors(a)))
    pb = list(reversed(session.ancestors(b)))
    for x, y in zip(pa, pb, strict=False):
        if x.name != y.name:
            return x, y
    return pa[-1], pb[-1]
