"""KAI Portal scheduling engine: a Snapshot of plain data classes in, a CycleResult out.

Where things are (a cycle reads top to bottom):

* ``model``: the snapshot (nodes, queues, jobs, tasks) and ``Config``; ``result``: the outcome.
* ``cycle``: one cycle: split into node pools (``pools``), fair shares, a session, the actions.
* ``session``: one pool's virtual cluster for the cycle (KAI's framework session), built from
  ``state`` (devices, node and queue state, placements) and changed only through a ``statement``
  (checkpoint, rollback, commit).
* ``fairshare``: queue fair shares; ``ordering``: which queue and job go next; ``gang``: a job's
  gang minimum, sub-groups and elastic extras.
* ``fit``: does a task fit a node, on which devices; ``placement``: score the fitting nodes and
  take the best, through ``node_index`` where that is faster; ``rules``: taints, selectors
  and affinity; ``topology``: candidate node sets for topology levels.
* ``actions``: allocate, consolidation, reclaim, preempt, stale gangs; ``reasons``: the
  messages, as KAI words them.
* ``overcommit``: over-commit checks of a result; ``gc_pause``: the garbage collector paused
  while a cycle builds its state.
* ``scenario``, ``simulate``, ``bench``: scenario files, simulated time, benchmarks (each with a
  command line).
"""

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
