"""Cyclic garbage collection paused around code that allocates many objects and frees none.

Building a snapshot at 50,000 pods, or a cycle's state over it, creates a few hundred thousand
objects in one go (rows, engine tasks, placements, outcomes, undo records) that live until the
step ends; every few thousand allocations trigger CPython's cyclic collector, which walks every
tracked object of the process again: half of the portal's snapshot build and a fifth of the stress
cycle, measured. Those objects form no cycles to collect, so pausing the collector loses nothing;
it runs again as usual afterwards (reference counting frees everything else meanwhile).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block; restored afterwards (left off if it was off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
