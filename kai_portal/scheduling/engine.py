"""The engine as the portal sees it: everything kai_portal uses from ``scheduler``, in one place.

Only this package imports the engine (import-linter: "Only the scheduling adapter imports the
engine"), and only through ``scheduler``'s public face (scheduler/__init__.py); the previews
(kai_portal/previews) reach the engine through this module.
"""

from __future__ import annotations

from scheduler import (
    DEFAULT_POD_TEXT,
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    Arrival,
    Config,
    CycleResult,
    Eviction,
    Job,
    JobQueue,
    MatchExpression,
    Node,
    PreferredTerm,
    Queue,
    QueueOutcome,
    QueueResource,
    Reason,
    SimResult,
    Snapshot,
    Taint,
    Task,
    TaskState,
    Toleration,
    gc_paused,
    job_request,
    open_session,
    pending_tasks,
    queue_pools,
    render,
    run_cycle,
)
from scheduler import simulate_over_time as simulate

__all__ = [
    "DEFAULT_POD_TEXT",
    "MATCH_OPERATORS",
    "TAINT_EFFECTS",
    "Arrival",
    "Config",
    "CycleResult",
    "Eviction",
    "Job",
    "JobQueue",
    "MatchExpression",
    "Node",
    "PreferredTerm",
    "QueueOutcome",
    "Queue",
    "QueueResource",
    "Reason",
    "SimResult",
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
