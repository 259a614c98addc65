"""Who is acting right now, for the audit log.

The web middleware sets it per request from ``request.user``; management
commands wrap their work in ``acting_as(...)``. Code running with nothing set
is recorded as ``system``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Actor:
    user: Any | None  # a User, or None for the system
    source: str


SYSTEM = Actor(user=None, source="system")
_current: ContextVar[Actor] = ContextVar("kai_audit_actor", default=SYSTEM)


def current_actor() -> Actor:
    return _current.get()


@contextmanager
def acting_as(user: Any | None, source: str) -> Iterator[Actor]:
    """Attribute every audited change inside the block to ``user`` (None = system) via ``source``."""
    actor = Actor(user=user, source=source)
    token = _current.set(actor)
    try:
        yield actor
    finally:
        _current.reset(token)
