"""KAI Portal scheduling engine: a Snapshot of plain data classes in, a CycleResult out."""

from __future__ import annotations

from scheduler.cycle import advance, run_cycle, run_rounds
from scheduler.model import (
    Config,
    ExternalUsage,
    Job,
    Node,
    Queue,
    QueueResource,
    Snapshot,
    Task,
    TaskState,
    TopologyConstraint,
)
from scheduler.result import CycleResult, Event, Eviction, QueueOutcome, TaskOutcome

__all__ = [
    "Config",
    "CycleResult",
    "Event",
    "Eviction",
    "ExternalUsage",
    "Job",
    "Node",
    "Queue",
    "QueueOutcome",
    "QueueResource",
    "Snapshot",
    "Task",
    "TaskOutcome",
    "TaskState",
    "TopologyConstraint",
    "advance",
    "run_cycle",
    "run_rounds",
]
