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
* ``actions``: allocate, consolidation, reclaim, preempt, stale gangs; ``reasons``: why, as
  ``Reason`` values (a code, typed parameters, tasks and jobs as ``Ref``), worded as KAI words
  them by ``render(reason, names)`` where they are shown.
* ``overcommit``: over-commit checks of a result; ``gc_pause``: the garbage collector paused
  while a cycle builds its state.
* ``scenario``, ``simulate``, ``bench``: scenario files, simulated time, benchmarks (each with a
  command line).
"""

from __future__ import annotations

from scheduler.cycle import advance, open_session, run_cycle, run_rounds
from scheduler.gang import pending_tasks
from scheduler.gc_pause import gc_paused
from scheduler.model import (
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    Config,
    ExternalUsage,
    Job,
    MatchExpression,
    Node,
    PreferredTerm,
    Queue,
    QueueResource,
    Snapshot,
    Taint,
    Task,
    TaskState,
    Toleration,
    TopologyConstraint,
)
from scheduler.ordering import JobQueue, job_request
from scheduler.pools import queue_pools
from scheduler.reasons import (
    DEFAULT_POD_TEXT,
    NON_PREEMPTIBLE_OVER_QUOTA,
    OVER_LIMIT,
    PROTECTED_BY_MIN_RUNTIME,
    QUEUE_DOES_NOT_EXIST,
    RECLAIM_SOURCE,
    Names,
    Reason,
    Ref,
    as_keyed,
    render,
)
from scheduler.result import CycleResult, Event, Eviction, NodeRoom, QueueOutcome, TaskOutcome
from scheduler.room import RoomShape, largest_per_pod, room_eligible, room_fits, room_shape

# The simulator's entry point under a name of its own: ``simulate`` is also the subpackage.
from scheduler.simulate import Arrival, SimResult
from scheduler.simulate import simulate as simulate_over_time

__all__ = [
    "DEFAULT_POD_TEXT",
    "Arrival",
    "MATCH_OPERATORS",
    "TAINT_EFFECTS",
    "Config",
    "CycleResult",
    "Event",
    "Eviction",
    "ExternalUsage",
    "Job",
    "JobQueue",
    "MatchExpression",
    "NON_PREEMPTIBLE_OVER_QUOTA",
    "OVER_LIMIT",
    "QUEUE_DOES_NOT_EXIST",
    "NodeRoom",
    "RoomShape",
    "largest_per_pod",
    "room_eligible",
    "room_fits",
    "room_shape",
    "PROTECTED_BY_MIN_RUNTIME",
    "RECLAIM_SOURCE",
    "Names",
    "Node",
    "PreferredTerm",
    "Queue",
    "QueueOutcome",
    "QueueResource",
    "Reason",
    "Ref",
    "SimResult",
    "Snapshot",
    "Taint",
    "Task",
    "TaskOutcome",
    "TaskState",
    "Toleration",
    "TopologyConstraint",
    "advance",
    "gc_paused",
    "job_request",
    "open_session",
    "pending_tasks",
    "queue_pools",
    "as_keyed",
    "render",
    "run_cycle",
    "run_rounds",
    "simulate_over_time",
]
