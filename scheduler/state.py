"""The pieces of one cycle's virtual cluster: GPU devices, node and queue state, and where each
task is placed (KAI's ``NodeInfo``, ``QueueInfo`` and task status). A :class:`~scheduler.session.Session`
holds them; a :class:`~scheduler.statement.Statement` changes them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.model import RESOURCES, Job, Node, Queue, Task, TaskState

EPS = 1e-9


@dataclass(slots=True)
class Device:
    """One GPU device. Memory in MiB; a whole-GPU task occupies all of it."""

    index: int
    memory: float
    active: float = 0.0  # held by tasks that stay (running, allocated, pipelined)
    releasing: float = 0.0  # held by releasing tasks and not yet promised to a pipelined task
    whole: bool = False  # held by a whole-GPU task
    # KAI's GPU group on the device, by identity (``node_info.UsedSharedGPUsMemory`` per group id):
    # ``group_rel`` is the memory of the group's releasing members, which KAI still counts as used
    # (``GetUsedGpuPortion``, the gpupack / gpuspread score, is ``active + group_rel``); ``group``
    # changes each time a fraction opens a new group on the device (KAI gives it a new id:
    # ``gpu_sharing.findGpuForSharingOnNode``), so an evicted member put back on the device joins
    # that new group, not its own.
    group_rel: float = 0.0
    group: int = 0

    @property
    def is_free(self) -> bool:
        return self.active <= EPS

    @property
    def is_idle(self) -> bool:
        return self.active <= EPS and self.releasing <= EPS

    @property
    def is_group(self) -> bool:
        """A shared device that still has an active fractional task (it can take more)."""
        return self.active > EPS and not self.whole


def opens_group(d: Device) -> bool:
    """Whether a fractional task placed on this device starts a new GPU group: the device is
    idle, or a whole-GPU task holds or releases it. A new group needs a reservation pod, which
    takes a pod slot on the node (kai-semantics §1.5)."""
    return d.whole or d.is_idle


@dataclass
class NodeState:
    node: Node
    devices: list[Device]
    cpu_idle: float
    mem_idle: float
    pods_idle: float
    cpu_rel: float = 0.0
    mem_rel: float = 0.0
    pods_rel: float = 0.0
    # Whole GPUs KAI's node still counts idle that the devices do not (may be negative): KAI's
    # ``node_info.addTaskResources`` charges a Pipelined task to the releasing vector alone, so a
    # device a task was pipelined onto from idle stays idle there, and evicting a pipelined task
    # (Releasing) takes its GPUs off idle (``Statement.Evict``). Read only by the node score
    # (``fit.Fit.avail``: ``nodeavailability``); where tasks go is still the devices' business.
    piped_idle: int = 0
    # Whole GPUs of the running pods ``Session.load_tasks`` loaded here with no stored placement
    # (``Placements``), counted as they load: KAI's GPU counters (``gpu_ledger.Ledger``) start
    # from them without reading each pod.
    pinned_whole: float = 0.0

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def schedulable(self) -> bool:
        return not self.node.unschedulable

    def free_whole_gpus(self) -> int:
        """Devices that are free now or once releasing tasks leave."""
        return sum(1 for d in self.devices if d.active <= EPS)  # is_free

    def idle_whole_gpus(self) -> int:
        # ``is_idle`` written out: the result reads this for every node of the pool.
        return sum(1 for d in self.devices if d.active <= EPS and d.releasing <= EPS)

    @property
    def has_group(self) -> bool:
        """A device here is shared by fractional tasks that stay and is not over-full (KAI: a
        used GPU group, not all releasing, that a task asking 0 MiB fits on)."""
        return any(d.is_group and d.memory - d.active >= -EPS for d in self.devices)


@dataclass
class QueueState:
    queue: Queue
    children: list[str] = field(default_factory=list)
    allocated: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    allocated_np: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    fair_share: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))
    requested: dict[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0.0))

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def is_leaf(self) -> bool:
        return not self.children

    # Allocatable share per resource (``ordering.allocatable_share``), cached for the fair-share
    # dict it was computed from: fair shares are replaced as a whole dict, never edited in place.
    _as_of: dict[str, float] | None = field(default=None, init=False, repr=False, compare=False)
    _as: dict[str, float] = field(default_factory=dict, init=False, repr=False, compare=False)

    # Quota and limit per resource, read from the queue once (a queue does not change in a cycle).
    _quota: dict[str, float] | None = field(default=None, init=False, repr=False, compare=False)
    _limit: dict[str, float] | None = field(default=None, init=False, repr=False, compare=False)

    def quotas(self) -> dict[str, float]:
        """Quota per resource of ``RESOURCES`` (read once; do not change it)."""
        q = self._quota
        if q is None:
            q = self._quota = {x: self.queue.res(x).quota for x in RESOURCES}
        return q

    def quota(self, r: str) -> float:
        q = self.quotas()
        return q[r] if r in q else self.queue.res(r).quota

    def limit(self, r: str) -> float:
        lim = self._limit
        if lim is None:
            lim = self._limit = {x: self.queue.res(x).limit for x in RESOURCES}
        return lim[r] if r in lim else self.queue.res(r).limit

    def allocatable(self) -> dict[str, float]:
        """AS per resource: the quota when unlimited (-1), else max(quota, FS) capped at the limit."""
        fs = self.fair_share
        if self._as_of is not fs:
            out: dict[str, float] = {}
            for r in RESOURCES:
                res = self.queue.res(r)
                d, lim = res.quota, res.limit
                if d < 0:
                    out[r] = lim
                else:
                    share = max(d, fs[r])
                    out[r] = min(share, lim) if lim >= 0 else share
            self._as, self._as_of = out, fs
        return self._as


@dataclass(slots=True)
class Placement:
    """Where a task sits in the virtual state and what it is charged."""

    status: TaskState
    node: str | None = None
    devices: tuple[int, ...] = ()
    gpu_memory: float = 0.0  # MiB per device, for fractional tasks
    charge: dict[str, float] = field(default_factory=dict)
    promised: float = 0.0  # MiB per device a fractional pipelined task took out of releasing memory
    from_releasing: bool = False  # placed this cycle onto releasing resources


@dataclass(slots=True)
class LoadedVictims:
    """What the preemptible one-pod jobs of a leaf queue that ``Session.load_tasks`` loaded
    running on pinned whole GPUs give as victims, summed as they load (the fields of
    ``actions.reclaim.victim_sums.LeafVictims``), so that reclaim's screen need not walk them."""

    jobs: int = 0
    gpu: float = 0.0
    biggest: float = 0.0
    first: str | None = None  # the first such job in load order
    started: bool = False  # some such job has a start time


class Placements(dict[str, Placement]):
    """Placements by task key, where the running pods that ``Session.load_tasks`` put on their
    pinned whole GPUs (the bulk of a large cluster) have none stored until one is read: a cycle
    that changes nothing, like a gang that cannot be placed, then builds no object per pod.

    ``placements[key]`` makes a missing one (KeyError for a key of no task held); ``get`` is the
    plain dict's and does not, so a reader that must see every task writes
    ``placements.get(key) or placements.on_demand(key)`` (a stored placement is always true),
    and a reader of many pods may read a missing one off its task instead (``deferring``).
    Holds no reference to its session, which reference counting alone then frees."""

    __slots__ = ("_jobs", "_deferred", "made")

    def __init__(self) -> None:
        super().__init__()
        self._jobs: Iterable[Job] | None = None
        self._deferred: dict[str, Task] | None = None  # by key, once one is asked for
        self.made: list[Task] = []  # the tasks whose placement ``on_demand`` made, in order

    def defer_running(self, jobs: Iterable[Job]) -> None:
        """From now on a task of ``jobs`` without a stored placement is one loaded as running
        on its pinned whole GPUs (every other task got one, and entries are only replaced)."""
        self._jobs = jobs

    @property
    def deferring(self) -> bool:
        """Whether a task without a stored placement runs as loaded (``defer_running``)."""
        return self._jobs is not None

    def __missing__(self, key: str) -> Placement:
        p = self.on_demand(key)
        if p is None:
            raise KeyError(key)
        return p

    def on_demand(self, key: str) -> Placement | None:
        """The placement of a pod loaded as running with none stored, made now and kept (the
        charge ``load_tasks`` gave it); None for a key with a stored one or of no task held."""
        deferred = self._deferred
        if deferred is None:
            if self._jobs is None:
                return None
            deferred = self._deferred = {t.key: t for j in self._jobs for t in j.tasks if t.key not in self}
        task = deferred.pop(key, None)
        if task is None:
            return None
        charge = {"gpu": float(int(task.gpu)), "cpu": task.cpu_millis, "memory": task.memory_mib}
        p = self[key] = Placement(TaskState.RUNNING, task.node, task.gpu_devices, 0.0, charge)
        self.made.append(task)
        return p
