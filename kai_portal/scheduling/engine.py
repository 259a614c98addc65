"""The engine as the portal sees it: everything kai_portal uses from ``scheduler``, in one place.

Only this package imports the engine (import-linter: "Only the scheduling adapter imports the
engine"), and only through this module; the previews (kai_portal/previews) use it too.

The first group is ``scheduler``'s public face (scheduler/__init__.py). The second reaches
into engine internals that scheduler/__init__.py does not export yet: the lead moves these
names into scheduler/__init__.py once the engine branches merge, and this module then imports
them from ``scheduler`` alone.
"""

from __future__ import annotations

from scheduler import (
    CycleResult,
    Eviction,
    Job,
    Node,
    QueueOutcome,
    QueueResource,
    Reason,
    Snapshot,
    Task,
    TaskState,
    render,
    run_cycle,
)

# Engine internals (to be exported by scheduler/__init__.py; see the module docstring).
from scheduler.cycle import open_session
from scheduler.gang import pending_tasks
from scheduler.gc_pause import gc_paused
from scheduler.model import (
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    MatchExpression,
    PreferredTerm,
    Taint,
    Toleration,
)
from scheduler.ordering import JobQueue, job_request
from scheduler.pools import queue_pools
from scheduler.reasons import DEFAULT_POD_TEXT
from scheduler.simulate import simulate

__all__ = [
    "DEFAULT_POD_TEXT",
    "MATCH_OPERATORS",
    "TAINT_EFFECTS",
    "CycleResult",
    "Eviction",
    "Job",
    "JobQueue",
    "MatchExpression",
    "Node",
    "PreferredTerm",
    "QueueOutcome",
    "QueueResource",
    "Reason",
    "Snapshot",
    "Taint",
    "Task",
    "TaskState",
    "Toleration",
    "gc_paused",
    "job_request",
    "open_session",
    "pending_tasks",
    "queue_pools",
    "render",
    "run_cycle",
    "simulate",
]
