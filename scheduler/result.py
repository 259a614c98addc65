"""What a cycle decided: per-task outcomes, per-queue numbers, events, counters.

Tasks and jobs appear by their keys (``Task.key``, ``Job.key``; a scenario's key is its name). Every
why is a ``Reason`` (``scheduler.reasons``), worded only where it is shown: ``to_json`` words them
with tasks and jobs named as keyed; the portal words them with the cluster's own names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.model import Node, TaskState
from scheduler.reasons import Names, Reason, as_keyed, render


@dataclass(slots=True)
class TaskOutcome:
    key: str  # the task's
    job: str  # the job's key
    status: TaskState
    node: str | None = None
    gpu_devices: tuple[int, ...] = ()
    reason: Reason | None = None  # why a Pending task waits (KAI's pod event text)
    pool: str = "default"

    def text(self, names: Names = as_keyed) -> str | None:
        """The reason as KAI's pod event words it (None: no reason)."""
        return None if self.reason is None else render(self.reason, names)

    def to_json(self, names: Names = as_keyed) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status.value,
            "node": self.node,
            "gpu_devices": list(self.gpu_devices),
            "reason": self.text(names),
        }


@dataclass
class QueueOutcome:
    """Numbers the UI shows for a queue; dicts keyed by gpu / cpu (millicores) / memory (MiB)."""

    deserved: dict[str, float] = field(default_factory=dict)
    fair_share: dict[str, float] = field(default_factory=dict)
    allocated: dict[str, float] = field(default_factory=dict)
    allocated_non_preemptible: dict[str, float] = field(default_factory=dict)
    requested: dict[str, float] = field(default_factory=dict)
    limit: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "deserved": self.deserved,
            "fair_share": self.fair_share,
            "allocated": self.allocated,
            "allocated_non_preemptible": self.allocated_non_preemptible,
            "requested": self.requested,
            "limit": self.limit,
        }


@dataclass(slots=True)
class Event:
    object: str  # task or job key
    kind: str  # Scheduled, Pipelined, Unschedulable, NotReady, Evict
    message: Reason

    def to_json(self, names: Names = as_keyed) -> dict[str, str]:
        return {"object": self.object, "kind": self.kind, "message": render(self.message, names)}


@dataclass
class Eviction:
    """One task evicted in the cycle, and why (kai-semantics.md §8)."""

    task: str  # the task's key
    job: str  # the job's key
    queue: str
    action: str  # reclaim | preempt | consolidation | stalegangeviction
    message: Reason  # KAI's eviction message
    evictor_job: str | None = None  # the key of the pending job the eviction made room for
    evictor_queue: str | None = None
    reason: Reason | None = None  # why this task was chosen as a victim
    node: str | None = None  # where it was running
    moved_to: str | None = None  # consolidation/re-placement: the node it is pipelined to
    pool: str = "default"

    def to_json(self, names: Names = as_keyed) -> dict[str, Any]:
        return {
            "task": self.task,
            "job": self.job,
            "queue": self.queue,
            "action": self.action,
            "message": render(self.message, names),
            "evictor_job": self.evictor_job,
            "evictor_queue": self.evictor_queue,
            "reason": "" if self.reason is None else render(self.reason, names),
            "node": self.node,
            "moved_to": self.moved_to,
        }


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What a schedulable node has idle once the cycle's decisions stand: devices with nothing on
    them and nothing leaving them, and the CPU, memory and pod slots no task holds or is given."""

    node: Node
    idle_gpus: int
    cpu_millis: float
    memory_mib: float
    pods: float


@dataclass
class CycleResult:
    tasks: dict[str, TaskOutcome] = field(default_factory=dict)  # by task key
    # Each queue's outcome in its own node pool (a queue lives in one shard); by pool in pool_queues.
    queues: dict[str, QueueOutcome] = field(default_factory=dict)
    pool_queues: dict[str, dict[str, QueueOutcome]] = field(default_factory=dict)
    # PodGroup message of each job left pending, by job key.
    job_messages: dict[str, Reason] = field(default_factory=dict)
    # Why reclaim, preempt or consolidation could not help a pending job ("<Reason>: <text>"); the
    # engine's own explanations, which KAI does not emit, so they are kept out of job_messages.
    job_notes: dict[str, list[Reason]] = field(default_factory=dict)
    # What blocks each job left pending, as the engine found it (never worded into ``to_json``, so
    # KAI's outputs stay as they are): the quota and limit refusals among its fit errors, the notes
    # of the eviction actions that could not help it, and what each one's search met (the jobs
    # protected by their minimum runtime, the queues reclaim may take from; ``reasons``, "what
    # blocks a pending job").
    job_blockers: dict[str, list[Reason]] = field(default_factory=dict)
    # Each pool's schedulable nodes and what they have idle after the cycle (by pool, then node
    # name): what "a smaller request" or "another pool" could use now. Not in ``to_json``.
    node_room: dict[str, list[NodeRoom]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    # Every task evicted this cycle (those re-placed elsewhere carry ``moved_to``).
    evictions: list[Eviction] = field(default_factory=list)

    def with_status(self, status: TaskState) -> list[TaskOutcome]:
        return [t for t in self.tasks.values() if t.status == status]

    def placed(self, task_keys: Iterable[str]) -> list[TaskOutcome]:
        """Those of these tasks (by key) this cycle placed (Allocated or Pipelined)."""
        return [
            o
            for key in task_keys
            if (o := self.tasks.get(key)) is not None
            and o.status in (TaskState.ALLOCATED, TaskState.PIPELINED)
        ]

    @property
    def allocations(self) -> list[TaskOutcome]:
        return self.with_status(TaskState.ALLOCATED)

    @property
    def pipelined(self) -> list[TaskOutcome]:
        return self.with_status(TaskState.PIPELINED)

    def job_message(self, job: str, names: Names = as_keyed) -> str | None:
        """The PodGroup message of a job left pending, worded (None: it has none)."""
        reason = self.job_messages.get(job)
        return None if reason is None else render(reason, names)

    def to_json(self, names: Names = as_keyed) -> dict[str, Any]:
        """The result with every reason worded, tasks and jobs named by ``names``."""
        return {
            "tasks": {n: t.to_json(names) for n, t in self.tasks.items()},
            "queues": {n: q.to_json() for n, q in self.queues.items()},
            "jobs": {n: render(m, names) for n, m in self.job_messages.items()},
            "job_notes": {n: [render(r, names) for r in notes] for n, notes in self.job_notes.items()},
            "events": [e.to_json(names) for e in self.events],
            "counters": self.counters,
            "evictions": [e.to_json(names) for e in self.evictions],
        }
