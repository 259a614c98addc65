"""The virtual cluster state of one cycle in one node pool.

Nodes track idle and releasing resources per device; queues track allocated
(A) and non-preemptible allocated (ANP) amounts for their whole subtree. All
changes go through a :class:`Statement`, which can roll back to a checkpoint,
so actions can try placements (and, in part 2, victim evictions) virtually.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.model import RESOURCES, Config, Job, Node, Queue, Task, TaskState, clean, round_gpu
from scheduler.result import Eviction

EPS = 1e-9


@dataclass
class Device:
    """One GPU device. Memory in MiB; a whole-GPU task occupies all of it."""

    index: int
    memory: float
    active: float = 0.0  # held by tasks that stay (running, allocated, pipelined)
    releasing: float = 0.0  # held by releasing tasks and not yet promised to a pipelined task
    whole: bool = False  # held by a whole-GPU task

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

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def schedulable(self) -> bool:
        return not self.node.unschedulable

    def free_whole_gpus(self) -> int:
        """Devices that are free now or once releasing tasks leave."""
        return sum(1 for d in self.devices if d.is_free)

    def idle_whole_gpus(self) -> int:
        return sum(1 for d in self.devices if d.is_idle)


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

    def quota(self, r: str) -> float:
        return self.queue.res(r).quota

    def limit(self, r: str) -> float:
        return self.queue.res(r).limit

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


@dataclass
class Placement:
    """Where a task sits in the virtual state and what it is charged."""

    status: TaskState
    node: str | None = None
    devices: tuple[int, ...] = ()
    gpu_memory: float = 0.0  # MiB per device, for fractional tasks
    charge: dict[str, float] = field(default_factory=dict)
    promised: float = 0.0  # MiB per device a fractional pipelined task took out of releasing memory
    from_releasing: bool = False  # placed this cycle onto releasing resources


class Session:
    """State of one pool for one cycle."""

    def __init__(
        self, pool: str, config: Config, nodes: list[Node], queues: list[Queue], jobs: list[Job]
    ) -> None:
        self.pool = pool
        self.config = config
        self.nodes: dict[str, NodeState] = {
            n.name: NodeState(
                node=n,
                devices=[Device(i, float(n.gpu_memory_mib)) for i in range(n.gpus)],
                cpu_idle=float(n.cpu_millis),
                mem_idle=float(n.memory_mib),
                pods_idle=float(n.max_pods),
            )
            for n in sorted(nodes, key=lambda n: n.name)
        }
        self.queues: dict[str, QueueState] = {q.name: QueueState(q) for q in queues}
        self._ancestors: dict[str, list[QueueState]] = {}
        for q in queues:
            if q.parent in self.queues:
                self.queues[q.parent].children.append(q.name)
        self.jobs: dict[str, Job] = {j.name: j for j in jobs}
        # Every queue's node pool, this shard's and the others' (to explain a job in the wrong one).
        self.queue_pools: dict[str, str] = {}
        self.task_job: dict[str, Job] = {t.name: j for j in jobs for t in j.tasks}
        self.placements: dict[str, Placement] = {}
        # Fair-share capacity of the pool (schedulable nodes only); set when the cycle opens.
        self.capacity: dict[str, float] = dict.fromkeys(RESOURCES, 0.0)
        # Whether any node has a PreferNoSchedule taint (node scores then depend on tolerations).
        self.soft_taints = any(t.effect == "PreferNoSchedule" for n in nodes for t in n.taints)
        self.min_device_memory = min((n.gpu_memory_mib for n in nodes if n.gpus > 0), default=0.0)
        self.max_device_memory = max((n.gpu_memory_mib for n in nodes if n.gpus > 0), default=0.0)
        # Fit errors and messages gathered by actions, keyed by task / job name.
        self.task_reasons: dict[str, str] = {}
        self.job_errors: dict[str, list[tuple[str, str]]] = {}
        # Why an eviction action (reclaim, preempt, consolidation) could not help a pending job;
        # joined to the job's fit errors in its message.
        self.action_notes: dict[str, list[tuple[str, str]]] = {}
        self.events: list[tuple[str, str, str]] = []
        self.evictions: list[Eviction] = []
        # Monotonic deadline of the running eviction action (set by the action).
        self.deadline: float | None = None
        # Bumped on every change of a node's resources (placement, eviction, rollback); names of
        # nodes changed since the node index (``placement.NodeIndex``) last looked.
        self.node_version = 0
        # Bumped for a queue and its ancestors whenever a job below it is charged or uncharged
        # (its allocation and that job's placements change); ordering caches keys on it.
        self.queue_stamp: dict[str, int] = {}
        self.dirty_nodes: set[str] = set()
        self.node_index: object | None = None
        # Fit error of a task shape that fitted no node, valid while ``node_version`` is unchanged.
        # Per task shape: (node_version, error, each node's fit reason, reason counts); the counts
        # are brought up to date from ``node_log`` (nodes touched since) instead of a new scan.
        self.fit_error_cache: dict[
            tuple[object, ...], tuple[int, str, dict[str, str | None], dict[str, int]]
        ] = {}
        # Name of the node of every change, in order: node_log[v:] were touched since version v.
        self.node_log: list[str] = []
        self._pool_max: tuple[int, float, float] | None = None
        self.free_gpus_cache: tuple[int, float] | None = None
        self._jobs_by_queue: dict[str, list[Job]] | None = None
        self._pending_jobs: list[Job] | None = None

    def pending_jobs(self) -> list[Job]:
        """The jobs, in order, that had a pending task when first asked (by the cycle's first
        action, once every task is loaded): no other job can have one later in the cycle, since
        an eviction leaves a running task Releasing and only a task placed in this cycle goes
        back to Pending. Actions scan these instead of every running job."""
        if self._pending_jobs is None:
            pend = TaskState.PENDING
            placements = self.placements
            self._pending_jobs = [
                j
                for j in self.jobs.values()
                if any((p := placements.get(t.name)) is None or p.status == pend for t in j.tasks)
            ]
        return self._pending_jobs

    def jobs_of_queue(self, queue: str) -> list[Job]:
        """The jobs of one queue, in ``self.jobs`` order."""
        if self._jobs_by_queue is None:
            self._jobs_by_queue = {}
            for job in self.jobs.values():
                self._jobs_by_queue.setdefault(job.queue, []).append(job)
        return self._jobs_by_queue.get(queue, [])

    def touch_node(self, name: str) -> None:
        """Record that a node's resources change (called before and on undo of every change)."""
        self.node_version += 1
        self.dirty_nodes.add(name)
        self.node_log.append(name)

    def pool_max(self) -> tuple[int, float, float]:
        """Largest GPU count, CPU and memory of any node of the pool (static within a cycle)."""
        if self._pool_max is None:
            nodes = [ns.node for ns in self.nodes.values()]
            self._pool_max = (
                max((n.gpus for n in nodes), default=0),
                max((n.cpu_millis for n in nodes), default=0),
                max((n.memory_mib for n in nodes), default=0),
            )
        return self._pool_max

    # ---- queue helpers -------------------------------------------------
    def ancestors(self, queue: str) -> list[QueueState]:
        """The queue itself and every ancestor up to the top level (do not modify: the queue
        tree is fixed for the session, so the list is kept per queue)."""
        out = self._ancestors.get(queue)
        if out is None:
            out = []
            q: QueueState | None = self.queues.get(queue)
            while q is not None:
                out.append(q)
                q = self.queues.get(q.queue.parent) if q.queue.parent else None
            self._ancestors[queue] = out
        return out

    def _charge_queues(self, job: Job, charge: dict[str, float], sign: float) -> None:
        stamp = self.queue_stamp
        # Allocations are only ever written here, rounded: adding a zero would change nothing.
        deltas = [(r, sign * v) for r in RESOURCES if (v := charge.get(r, 0.0))]
        np_too = not job.is_preemptible
        for qs in self.ancestors(job.queue):
            stamp[qs.name] = stamp.get(qs.name, 0) + 1
            alloc = qs.allocated
            for r, d in deltas:
                alloc[r] = clean(alloc[r] + d)
            if np_too:
                alloc_np = qs.allocated_np
                for r, d in deltas:
                    alloc_np[r] = clean(alloc_np[r] + d)

    # ---- request conversion --------------------------------------------
    def gpu_fraction_on(self, task: Task, device_memory: float) -> float:
        """GPUs a task is charged on a node with this device memory."""
        if task.gpu >= 1:
            return float(task.whole_gpus)
        # A multi-device fraction (gpu-fraction-num-devices) takes its share on each device.
        per_device = 0.0
        if task.gpu > 0:
            per_device = round_gpu(task.gpu)
        elif task.gpu_memory_mib > 0 and device_memory > 0:
            per_device = math.ceil(round(100 * task.gpu_memory_mib / device_memory, 6)) / 100
        return round_gpu(per_device * task.fraction_device_count)

    def device_need(self, task: Task, device_memory: float) -> float:
        """MiB of one device a fractional task occupies."""
        if 0 < task.gpu < 1:
            return clean(task.gpu * device_memory)
        return float(task.gpu_memory_mib)

    def pending_request(self, task: Task, for_limit: bool = False) -> dict[str, float]:
        """A pending task's request; GPU memory converted with the smallest device
        memory for fair share and the largest for the queue capacity check (§2.1, §3.5)."""
        gpu = task.gpu if task.gpu > 0 else 0.0
        if task.gpu == 0 and task.gpu_memory_mib > 0:
            mem = self.max_device_memory if for_limit else self.min_device_memory
            gpu = task.gpu_memory_mib / mem if mem > 0 else 0.0
        gpu *= task.fraction_device_count
        return {
            "gpu": round_gpu(gpu) if not for_limit else gpu,
            "cpu": task.cpu_millis,
            "memory": task.memory_mib,
        }

    # ---- initial state ---------------------------------------------------
    def load_task(self, task: Task, job: Job) -> None:
        """Put a Running or Releasing task of the snapshot on its node."""
        if task.state not in (TaskState.RUNNING, TaskState.RELEASING) or task.node not in self.nodes:
            self.placements[task.name] = Placement(TaskState.PENDING)
            return
        ns = self.nodes[task.node]
        releasing = task.state == TaskState.RELEASING
        devices = self._initial_devices(ns, task)
        mem = 0.0
        if task.is_fractional:
            mem = self.device_need(task, ns.node.gpu_memory_mib)
        for i in devices:
            d = ns.devices[i]
            amount = mem if task.is_fractional else d.memory
            if task.is_fractional and opens_group(d):
                ns.pods_idle -= 1  # the group's reservation pod
            if releasing:
                d.releasing = clean(d.releasing + amount)
            else:
                d.active = clean(d.active + amount)
            if not task.is_fractional:
                d.whole = True
        ns.cpu_idle = clean(ns.cpu_idle - task.cpu_millis)
        ns.mem_idle = clean(ns.mem_idle - task.memory_mib)
        ns.pods_idle -= 1
        if releasing:
            ns.cpu_rel = clean(ns.cpu_rel + task.cpu_millis)
            ns.mem_rel = clean(ns.mem_rel + task.memory_mib)
            ns.pods_rel += 1
        charge = {
            "gpu": self.gpu_fraction_on(task, ns.node.gpu_memory_mib),
            "cpu": task.cpu_millis,
            "memory": task.memory_mib,
        }
        self.placements[task.name] = Placement(task.state, ns.name, devices, mem, charge)
        if not releasing:  # a releasing pod is no longer charged to its queue
            self._charge_queues(job, charge, +1)

    def hold_external(self) -> None:
        """Take out of each node what pods outside this scheduler hold (``Node.external``).

        Called once our own tasks are loaded: their devices are known (pinned) or chosen then,
        and the external whole GPUs take devices none of ours holds, highest index first. They
        are held like a whole-GPU task that never leaves: no task may share, pipeline onto or
        reclaim them. A node whose external pods already hold more than it has (an over-committed
        cluster) just has nothing left."""
        for ns in self.nodes.values():
            held = ns.node.external
            if not held:
                continue
            free = [d for d in reversed(ns.devices) if d.is_idle and not d.whole]
            for d in free[: held.gpus]:
                d.active = d.memory
                d.whole = True
            ns.cpu_idle = clean(ns.cpu_idle - held.cpu_millis)
            ns.mem_idle = clean(ns.mem_idle - held.memory_mib)
            ns.pods_idle -= held.pods

    def _initial_devices(self, ns: NodeState, task: Task) -> tuple[int, ...]:
        if task.gpu_devices:
            return tuple(i for i in task.gpu_devices if i < len(ns.devices))
        if task.whole_gpus:
            free = [d.index for d in ns.devices if d.is_idle and not d.whole]
            return tuple(free[: task.whole_gpus])
        if task.is_fractional:
            need = self.device_need(task, ns.node.gpu_memory_mib)
            groups = [
                d.index
                for d in ns.devices
                if not d.whole and not d.is_idle and d.memory - d.active - d.releasing >= need - EPS
            ]
            free = [d.index for d in ns.devices if d.is_idle]
            return tuple((groups + free)[: task.fraction_device_count])
        return ()

    # ---- statements --------------------------------------------------------
    def statement(self) -> Statement:
        return Statement(self)


class Statement:
    """Virtual operations with checkpoint/rollback (KAI's framework statement)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._undo: list[Callable[[], None]] = []

    def checkpoint(self) -> int:
        return len(self._undo)

    def rollback(self, checkpoint: int = 0) -> None:
        while len(self._undo) > checkpoint:
            self._undo.pop()()

    def commit(self) -> None:
        self._undo.clear()

    def _snapshot_node(self, ns: NodeState, devices: tuple[int, ...]) -> Callable[[], None]:
        """Undo of one operation on the node: its scalars and the devices it touches (each
        operation changes only the devices it names; undos run last first, so the others are
        as they were)."""
        session = self.session
        session.touch_node(ns.name)
        scalars = (ns.cpu_idle, ns.cpu_rel, ns.mem_idle, ns.mem_rel, ns.pods_idle, ns.pods_rel)
        devs = [(d, d.active, d.releasing, d.whole) for d in (ns.devices[i] for i in devices)]

        def restore() -> None:
            session.touch_node(ns.name)
            ns.cpu_idle, ns.cpu_rel, ns.mem_idle, ns.mem_rel, ns.pods_idle, ns.pods_rel = scalars
            for d, a, rel, w in devs:
                d.active, d.releasing, d.whole = a, rel, w

        return restore

    def place(self, task: Task, node: str, devices: tuple[int, ...], pipelined: bool) -> None:
        """Allocate (fits in idle) or pipeline (needs releasing resources) a task."""
        s = self.session
        ns = s.nodes[node]
        job = s.task_job[task.name]
        restore_node = self._snapshot_node(ns, devices)
        old = s.placements.get(task.name, Placement(TaskState.PENDING))
        mem = s.device_need(task, ns.node.gpu_memory_mib) if task.is_fractional else 0.0
        promised = 0.0
        for i in devices:
            d = ns.devices[i]
            if task.is_fractional:
                if opens_group(d):  # a new GPU group: its reservation pod takes a pod slot
                    if pipelined and ns.pods_idle < 2:
                        ns.pods_rel -= 1
                    else:
                        ns.pods_idle -= 1
                elif d.is_free:  # a group whose tasks are all releasing: its reservation pod stays
                    ns.pods_rel -= 1
                if d.is_free:  # a freed whole-GPU device becomes a shared one
                    d.whole = False
                short = clean(mem - (d.memory - d.active - d.releasing))
                if short > EPS:  # the missing part is promised out of releasing memory
                    promised = max(promised, min(short, d.releasing))
                    d.releasing = clean(max(0.0, d.releasing - short))
                d.active = clean(d.active + mem)
            else:
                d.active, d.releasing, d.whole = d.memory, 0.0, True
        if pipelined:
            ns.cpu_rel = clean(ns.cpu_rel - task.cpu_millis)
            ns.mem_rel = clean(ns.mem_rel - task.memory_mib)
            ns.pods_rel -= 1
        else:
            ns.cpu_idle = clean(ns.cpu_idle - task.cpu_millis)
            ns.mem_idle = clean(ns.mem_idle - task.memory_mib)
            ns.pods_idle -= 1
        charge = {
            "gpu": s.gpu_fraction_on(task, ns.node.gpu_memory_mib),
            "cpu": task.cpu_millis,
            "memory": task.memory_mib,
        }
        status = TaskState.PIPELINED if pipelined else TaskState.ALLOCATED
        s.placements[task.name] = Placement(status, node, devices, mem, charge, promised, pipelined)
        s._charge_queues(job, charge, +1)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, charge, -1)
            s.placements[task.name] = old

        self._undo.append(undo)

    def set_status(self, task: Task, status: TaskState) -> None:
        """Change only the status label (e.g. a gang's allocations become pipelined)."""
        s = self.session
        p = s.placements[task.name]
        old = p.status
        p.status = status

        def undo() -> None:
            p.status = old

        self._undo.append(undo)

    def evict(self, task: Task) -> None:
        """Evict a placed task.

        A task running at the snapshot becomes Releasing: its node resources turn into releasing
        resources and its queue is no longer charged. A task placed earlier in this cycle
        (Allocated or Pipelined) simply goes back to Pending and frees what it held.
        """
        s = self.session
        p = s.placements[task.name]
        if p.node is None or p.status in (TaskState.PENDING, TaskState.RELEASING):
            return
        if p.status in (TaskState.ALLOCATED, TaskState.PIPELINED):
            self._unplace(task)
            return
        ns = s.nodes[p.node]
        job = s.task_job[task.name]
        restore_node = self._snapshot_node(ns, p.devices)
        old = p
        for i in p.devices:
            d = ns.devices[i]
            amount = p.gpu_memory if task.is_fractional else d.memory
            d.active = clean(max(0.0, d.active - amount))
            d.releasing = clean(d.releasing + amount)
            if not task.is_fractional:
                d.whole = True
            elif d.is_free:  # the group's last active task: its reservation pod goes with it
                ns.pods_rel += 1
        ns.cpu_rel = clean(ns.cpu_rel + task.cpu_millis)
        ns.mem_rel = clean(ns.mem_rel + task.memory_mib)
        ns.pods_rel += 1
        s._charge_queues(job, p.charge, -1)
        s.placements[task.name] = Placement(TaskState.RELEASING, p.node, p.devices, p.gpu_memory, p.charge)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, old.charge, +1)
            s.placements[task.name] = old

        self._undo.append(undo)

    def _unplace(self, task: Task) -> None:
        """Take back a placement made in this cycle: the task is Pending again."""
        s = self.session
        p = s.placements[task.name]
        assert p.node is not None
        ns = s.nodes[p.node]
        job = s.task_job[task.name]
        restore_node = self._snapshot_node(ns, p.devices)
        for i in p.devices:
            d = ns.devices[i]
            if task.is_fractional:
                d.active = clean(max(0.0, d.active - p.gpu_memory))
                if p.from_releasing:
                    d.releasing = clean(d.releasing + p.promised)
                if d.is_idle:  # the group this task opened closes: its reservation slot is back
                    ns.pods_idle += 1
            else:
                d.active = 0.0
                if p.from_releasing:
                    d.releasing = d.memory
                else:
                    d.whole = False
        if p.from_releasing:
            ns.cpu_rel = clean(ns.cpu_rel + task.cpu_millis)
            ns.mem_rel = clean(ns.mem_rel + task.memory_mib)
            ns.pods_rel += 1
        else:
            ns.cpu_idle = clean(ns.cpu_idle + task.cpu_millis)
            ns.mem_idle = clean(ns.mem_idle + task.memory_mib)
            ns.pods_idle += 1
        s._charge_queues(job, p.charge, -1)
        s.placements[task.name] = Placement(TaskState.PENDING)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, p.charge, +1)
            s.placements[task.name] = p

        self._undo.append(undo)

    def room_left(self, task: Task) -> bool:
        """Whether a task evicted in this cycle still has its own room (devices, CPU, memory, pod
        slot) as releasing resources on its node: nothing placed since took any of it."""
        s = self.session
        p = s.placements[task.name]
        if p.status != TaskState.RELEASING or p.node is None:
            return False
        ns = s.nodes[p.node]
        # CPU, memory and pod slots are not per device: what counts is that the node, idle and
        # releasing together, still has them (a pipelined task may draw releasing below zero
        # while it really uses idle room, as in KAI's node accounting).
        slots = 1  # its own, and the reservation pod of each of its groups that has no active task
        if task.is_fractional:
            slots += sum(1 for i in p.devices if ns.devices[i].is_free)
        if not ns.schedulable or ns.pods_idle + ns.pods_rel < slots:
            return False
        if (
            ns.cpu_idle + ns.cpu_rel + 1e-4 < task.cpu_millis
            or ns.mem_idle + ns.mem_rel + 1e-4 < task.memory_mib
        ):
            return False
        for i in p.devices:
            d = ns.devices[i]
            amount = p.gpu_memory if task.is_fractional else d.memory
            if d.releasing + EPS < amount or (not task.is_fractional and d.active > EPS):
                return False
        return True

    def unevict(self, task: Task, status: TaskState = TaskState.RUNNING) -> bool:
        """Put a task evicted in this cycle back where it was, on its own devices; refused (False)
        when any of its room was taken since (e.g. a preemptor pipelined onto its GPU)."""
        s = self.session
        p = s.placements[task.name]
        if not self.room_left(task):
            return False
        assert p.node is not None
        ns = s.nodes[p.node]
        job = s.task_job[task.name]
        restore_node = self._snapshot_node(ns, p.devices)
        for i in p.devices:
            d = ns.devices[i]
            amount = p.gpu_memory if task.is_fractional else d.memory
            if task.is_fractional and d.is_free:  # the group is active again: its reservation stays
                ns.pods_rel -= 1
            d.releasing = clean(max(0.0, d.releasing - amount))
            d.active = clean(d.active + amount)
        ns.cpu_rel = clean(ns.cpu_rel - task.cpu_millis)
        ns.mem_rel = clean(ns.mem_rel - task.memory_mib)
        ns.pods_rel -= 1
        s._charge_queues(job, p.charge, +1)
        s.placements[task.name] = Placement(status, p.node, p.devices, p.gpu_memory, p.charge)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, p.charge, -1)
            s.placements[task.name] = p

        self._undo.append(undo)
        return True
