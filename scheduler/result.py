"""What a cycle decided: per-task outcomes, per-queue numbers, events, counters.

Tasks and jobs appear by their keys (``Task.key``, ``Job.key``; a scenario's key is its name). Every
why is a ``Reason`` (``scheduler.reasons``), worded only where it is shown: ``to_json`` words them
with tasks and jobs named as keyed; the portal words them with the cluster's own names."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

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


V = TypeVar("V")


class Deferred(dict[str, V]):
    """A dict some of whose entries are written when it is first read: ``CycleResult.tasks``
    (the outcome of every pod of a large cluster that runs as loaded, on its pinned GPUs, is made
    only then) and ``CycleResult.node_room`` (``cycle._collect``). A cycle that changes nothing,
    like a gang that cannot be placed, leaves them to whoever reads the result.

    ``defer(fill)`` queues a writer; the first read of any kind runs the queued writers in order
    (each writes with ``dict.__setitem__``), so keys, order and values are those of writing them
    all at once. Every dict method that reads or writes goes through ``_ready`` first."""

    __slots__ = ("_fills",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fills: list[Callable[[dict[str, V]], None]] = []

    def defer(self, fill: Callable[[dict[str, V]], None]) -> None:
        """Queue ``fill`` (it writes its entries into the dict it is given) after those queued."""
        self._fills.append(fill)

    def _ready(self) -> None:
        fills = self._fills
        if fills:
            self._fills = []
            for fill in fills:
                fill(self)

    def __getitem__(self, key: str) -> V:
        self._ready()
        return dict.__getitem__(self, key)

    def __setitem__(self, key: str, value: V) -> None:
        self._ready()
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        self._ready()
        dict.__delitem__(self, key)

    def __contains__(self, key: object) -> bool:
        self._ready()
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[str]:
        self._ready()
        return dict.__iter__(self)

    def __reversed__(self) -> Iterator[str]:
        self._ready()
        return dict.__reversed__(self)

    def __len__(self) -> int:
        self._ready()
        return dict.__len__(self)

    def __eq__(self, other: object) -> bool:
        self._ready()
        if isinstance(other, Deferred):
            other._ready()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        self._ready()
        return dict.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, (dict(self.items()),))

    def __or__(self, other: Any) -> Any:
        self._ready()
        return dict(self.items()) | other

    def __ror__(self, other: Any) -> Any:
        self._ready()
        return other | dict(self.items())

    def __ior__(self, other: Any) -> Deferred[V]:  # type: ignore[override]
        self.update(other)
        return self

    def get(self, key: str, default: Any = None) -> Any:
        self._ready()
        return dict.get(self, key, default)

    def keys(self) -> Any:
        self._ready()
        return dict.keys(self)

    def values(self) -> Any:
        self._ready()
        return dict.values(self)

    def items(self) -> Any:
        self._ready()
        return dict.items(self)

    def copy(self) -> Deferred[V]:
        self._ready()
        return Deferred(dict.items(self))

    def pop(self, *args: Any) -> Any:
        self._ready()
        return dict.pop(self, *args)

    def popitem(self) -> tuple[str, V]:
        self._ready()
        return dict.popitem(self)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._ready()
        return dict.setdefault(self, key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._ready()
        dict.update(self, *args, **kwargs)

    def clear(self) -> None:
        self._fills = []
        dict.clear(self)


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
    # By task key. A ``Deferred`` dict: the outcomes of pods that ran as loaded are made from the
    # snapshot's tasks when it is first read, so do not change those tasks in place before then.
    tasks: dict[str, TaskOutcome] = field(default_factory=Deferred)
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
    node_room: dict[str, list[NodeRoom]] = field(default_factory=Deferred)
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
