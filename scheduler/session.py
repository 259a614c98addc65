"""The virtual cluster of one cycle in one node pool (KAI's framework ``Session``).

A session loads the snapshot's running and releasing tasks onto their nodes and charges their
queues; it answers the actions' questions (pending jobs, a queue's ancestors, a task's request
on a node). Nodes track idle and releasing resources per device (``scheduler.state``); queues
track allocated (A) and non-preemptible allocated (ANP) amounts for their whole subtree. Every
change in the cycle goes through a :class:`~scheduler.statement.Statement`, which can roll back
to a checkpoint, so actions try placements and victim evictions virtually.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from typing import TypeVar, cast

from scheduler.gpu_ledger import Ledger
from scheduler.model import RESOURCES, Config, Job, Node, Queue, Task, TaskState, clean, round_gpu
from scheduler.reasons import Reason
from scheduler.result import Eviction
from scheduler.state import (
    EPS,
    Device,
    LoadedVictims,
    NodeState,
    Placement,
    Placements,
    QueueState,
    opens_group,
)
from scheduler.statement import Statement

# Task states as module constants: reading a member through the enum class costs ~15x a global.
_PENDING = TaskState.PENDING
_RUNNING = TaskState.RUNNING
_RELEASING = TaskState.RELEASING

assert RESOURCES == ("gpu", "cpu", "memory")  # written out in ``Session._charge_queues``


T = TypeVar("T")


class Session:
    """State of one pool for one cycle."""

    # Over 80 lines: it declares every field of the session, each with why it is there.
    def __init__(
        self, pool: str, config: Config, nodes: list[Node], queues: list[Queue], jobs: list[Job]
    ) -> None:
        self.pool = pool
        self.config = config
        self.nodes: dict[str, NodeState] = {n.name: _node_state(n) for n in sorted(nodes, key=_name)}
        self.queues: dict[str, QueueState] = {q.name: QueueState(q) for q in queues}
        self._ancestors: dict[str, list[QueueState]] = {}
        for q in queues:
            if q.parent in self.queues:
                self.queues[q.parent].children.append(q.name)
        self.jobs: dict[str, Job] = {j.key: j for j in jobs}
        # Every queue's node pool, this shard's and the others' (to explain a job in the wrong one).
        self.queue_pools: dict[str, str] = {}
        self._task_job: dict[str, Job] | None = None  # ``task_job``, made on first use
        # Every task's placement; a running pod on its pinned whole GPUs gets its own only when
        # first read (``Placements``).
        self.placements = Placements()
        # Fair-share capacity of the pool (schedulable nodes only); set when the cycle opens.
        self.capacity: dict[str, float] = dict.fromkeys(RESOURCES, 0.0)
        # Whether any node has a PreferNoSchedule taint (node scores then depend on tolerations).
        self.soft_taints = any(t.effect == "PreferNoSchedule" for n in nodes for t in n.taints)
        # Whether any node has a taint that keeps untolerating pods off it for good.
        self.hard_taints = any(t.effect in ("NoSchedule", "NoExecute") for n in nodes for t in n.taints)
        self.min_device_memory = min((n.gpu_memory_mib for n in nodes if n.gpus > 0), default=0.0)
        self.max_device_memory = max((n.gpu_memory_mib for n in nodes if n.gpus > 0), default=0.0)
        # Fit errors and messages gathered by actions, keyed by task / job key.
        self.task_reasons: dict[str, Reason] = {}
        self.job_errors: dict[str, list[tuple[str, Reason]]] = {}
        # Why an eviction action (reclaim, preempt, consolidation) could not help a pending job;
        # joined to the job's fit errors in its message.
        self.action_notes: dict[str, list[tuple[str, Reason]]] = {}
        # What stopped the search of each action that left a note: {action: {job key: reasons}}
        # (``actions/solvers/blockers.py``; the result's ``job_blockers``).
        self.blockers: dict[str, dict[str, list[Reason]]] = {}
        self.events: list[tuple[str, str, Reason]] = []
        self.evictions: list[Eviction] = []
        # Tasks pipelined earlier in the cycle and then evicted, by the node they were pipelined
        # to: KAI's Statement.Evict makes them Releasing there (statement.go: Evict); the engine
        # keeps them Pending and ``cycle._collect`` reports a still-pending one Releasing there.
        self.evicted_pipelined: dict[str, str] = {}
        # Nodes each task was moved off by a committed scenario of this cycle: KAI's node keeps
        # the Releasing pod of a task moved off it (statement.go: Evict updates it there,
        # Pipeline adds the task to its new node only), so a later Pipeline onto such a node
        # un-evicts the task instead (``simulation._back_to_its_move``).
        self.moved_off: dict[str, set[str]] = {}
        # Monotonic deadline of the running eviction action, and its name (set by the action).
        self.deadline: float | None = None
        self.action = ""
        # Eviction actions that stopped at their deadline (``Config.action_time_budget_s``, a fault
        # stop): their answer depends on the machine's speed, so the cycle counts them
        # (``actions_out_of_time``).
        self.out_of_time: set[str] = set()
        # Work left to the running eviction action (``Config.action_work_budget``), and the actions
        # that spent it before trying every job (``actions_out_of_work``: deterministic).
        self.work_left = config.action_work_budget
        self.out_of_work: set[str] = set()
        # Bumped on every change of a node's resources (placement, eviction, rollback); names of
        # nodes changed since the node index (``node_index.NodeIndex``) last looked.
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
            tuple[object, ...], tuple[int, Reason, dict[str, str | None], dict[str, int]]
        ] = {}
        # Name of the node of every change, in order: node_log[v:] were touched since version v.
        self.node_log: list[str] = []
        self._pool_max: tuple[int, float, float] | None = None
        # Sums over every node kept until a node's resources next change (``per_node_version``).
        self.node_memo: dict[Callable[[Session], object], tuple[int, object]] = {}
        self._jobs_by_queue: dict[str, list[Job]] | None = None
        self._pending_jobs: list[Job] | None = None
        self._pending_candidates: list[Job] | None = None
        self._node_list: list[NodeState] | None = None
        self._preemptible: dict[str | None, list[Job]] = {}
        # Reclaim's per-leaf victim sums by allocation stamp (``actions.reclaim.victim_sums``) and each
        # job's place in ``jobs``.
        self.leaf_victims: dict[str, tuple[int, object]] = {}
        # Per leaf queue, the running tasks' charges as loaded (count, GPU, CPU, memory, then the
        # non-preemptible ones' sums) when every amount is exact in quarters (``load_tasks``).
        self.running_sums: dict[str, list[float]] | None = None
        # Per leaf queue whose loaded jobs are all one-pod jobs on the fast path of ``load_tasks``:
        # its allocation stamp after the load and its victims' sums then (``victim_sums``).
        self.loaded_victims: dict[str, tuple[int, LoadedVictims]] = {}
        # KAI's per-node GPU counters, kept by the statements while consolidation runs
        # (``scheduler/gpu_ledger.py``); None otherwise
        self.gpu_ledger: Ledger | None = None
        self.job_positions: dict[str, int] | None = None
        # Set by ``load_tasks``: the jobs, in order, with every placement it stored (all but
        # those of the running pods it defers, ``Placements``) and how many it stored; while no
        # other placement is made, the others' jobs all run as loaded (``cycle._collect``).
        self.stored_jobs: list[Job] | None = None
        self.stored_count = 0
        # Set by ``load_tasks``: the jobs, in order, that may be a gang below its minimum (more
        # than one pod, sub-groups, a minimum over one, or a pod not loaded running on pinned
        # GPUs); no other job is read by the stale-gang pass.
        self.stale_candidates: list[Job] | None = None

    def close(self) -> None:
        """Drop what refers back to the session (its node index, KAI's GPU counters), once the
        cycle has read it.

        Without a reference cycle the session's objects (one device per GPU, the placements made)
        are freed as soon as the cycle lets go of it; with one, they wait for the cyclic
        collector, whose next young-generation pass then walks all of them first."""
        self.node_index = None
        self.gpu_ledger = None

    @property
    def task_job(self) -> dict[str, Job]:
        """Each task's job, by task key. Made when first asked (a placement, an eviction): a
        cycle that changes nothing, like a gang that cannot be placed, never reads it, and it
        holds an entry per running pod."""
        if self._task_job is None:
            self._task_job = {t.key: j for j in self.jobs.values() for t in j.tasks}
        return self._task_job

    def pending_jobs(self) -> list[Job]:
        """The jobs, in order, that had a pending task when first asked (by the cycle's first
        action, once every task is loaded): no other job can have one later in the cycle, since
        an eviction leaves a running task Releasing and only a task placed in this cycle goes
        back to Pending. Actions scan these instead of every running job."""
        if self._pending_jobs is None:
            pend = _PENDING
            placements = self.placements
            # Only a job with a task pending at load can have one now (``load_tasks``).
            candidates = self._pending_candidates
            self._pending_jobs = [
                j
                for j in (self.jobs.values() if candidates is None else candidates)
                if any(
                    (p := placements.get(t.key) or placements.on_demand(t.key)) is None or p.status == pend
                    for t in j.tasks
                )
            ]
        return self._pending_jobs

    @property
    def pending_at_load(self) -> list[Job] | None:
        """The jobs, in order, with a task pending when loaded (None before ``load_tasks``)."""
        return self._pending_candidates

    def jobs_of_queue(self, queue: str) -> list[Job]:
        """The jobs of one queue, in ``self.jobs`` order."""
        if self._jobs_by_queue is None:
            by_queue: dict[str, list[Job]] = {}
            for job in self.jobs.values():
                jobs = by_queue.get(job.queue)
                if jobs is None:
                    by_queue[job.queue] = [job]
                else:
                    jobs.append(job)
            self._jobs_by_queue = by_queue
        return self._jobs_by_queue.get(queue, [])

    def preemptible_leaf_jobs(self, queue: str | None = None) -> list[Job]:
        """The preemptible jobs of leaf queues (only ``queue``'s when given), in ``jobs`` order:
        fixed for the cycle (priorities and the queue tree do not change), so the eviction
        actions' victim scans (``victim_jobs``) run over these instead of every job."""
        hit = self._preemptible.get(queue)
        if hit is None:
            queues = self.queues
            hit = self._preemptible[queue] = [
                j
                for j in (self.jobs.values() if queue is None else self.jobs_of_queue(queue))
                if j.is_preemptible and j.queue in queues and queues[j.queue].is_leaf
            ]
        return hit

    def node_list(self) -> list[NodeState]:
        """Every node of the pool in name order (one list for the session: do not change it)."""
        if self._node_list is None:
            self._node_list = list(self.nodes.values())
        return self._node_list

    def per_node_version(self, compute: Callable[[Session], T]) -> T:
        """``compute(self)``, kept while no node's resources change (``node_version``): for sums
        over every node that actions ask for each pending job."""
        hit = self.node_memo.get(compute)
        if hit is not None and hit[0] == self.node_version:
            return cast(T, hit[1])
        value = compute(self)
        self.node_memo[compute] = (self.node_version, value)
        return value

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
        """The queue itself and every ancestor up to the top level (one list per queue, kept for
        the session: callers must not change it)."""
        out = self._ancestors.get(queue)
        if out is None:
            out = []
            q: QueueState | None = self.queues.get(queue)
            while q is not None:
                out.append(q)
                q = self.queues.get(q.queue.parent) if q.queue.parent else None
            self._ancestors[queue] = out
        return out

    def charge_step(self, job: Job, charge: dict[str, float]) -> None:
        """Charge ``charge`` to the job's queue and its ancestors as an allocation would, with no
        placement (what-if ordering). Goes through the allocation stamps, so cached queue keys see
        it."""
        self._charge_queues(job, charge, +1)

    def _charge_queues(self, job: Job, charge: dict[str, float], sign: float) -> None:
        # Every allocation, eviction and undo comes through here: the three resources are
        # written out, each ``clean(a + v)`` inline (the same operations).
        stamp = self.queue_stamp
        g = sign * charge.get("gpu", 0.0)
        c = sign * charge.get("cpu", 0.0)
        m = sign * charge.get("memory", 0.0)
        np_too = not job.is_preemptible
        for qs in self.ancestors(job.queue):
            name = qs.queue.name
            stamp[name] = stamp.get(name, 0) + 1
            for alloc in (qs.allocated, qs.allocated_np) if np_too else (qs.allocated,):
                v = alloc["gpu"] + g
                alloc["gpu"] = v if v % 1.0 == 0.0 else round(v, 6)
                v = alloc["cpu"] + c
                alloc["cpu"] = v if v % 1.0 == 0.0 else round(v, 6)
                v = alloc["memory"] + m
                alloc["memory"] = v if v % 1.0 == 0.0 else round(v, 6)

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
        by_memory = task.gpu == 0 and task.gpu_memory_mib > 0
        if by_memory:
            mem = self.max_device_memory if for_limit else self.min_device_memory
            gpu = task.gpu_memory_mib / mem if mem > 0 else 0.0
        gpu *= task.fraction_device_count
        if not for_limit:
            # KAI counts a pending GPU-memory task as its memory over the smallest node's GPU
            # memory, not rounded (``GpuMemoryAsGpuFraction``: the proportion plugin's requests,
            # ``GetTasksToAllocateInitResourceVector`` for a reclaimer), while a placed one is
            # charged its share rounded up to hundredths (``gpu_fraction_on``): 10240 MiB of
            # 40000 asks 0.256 and holds 0.26 (kai_diff seed 111231).
            gpu = clean(gpu) if by_memory else round_gpu(gpu)
        return {
            "gpu": gpu,
            "cpu": task.cpu_millis,
            "memory": task.memory_mib,
        }

    # ---- initial state ---------------------------------------------------
    def load_task(self, task: Task, job: Job) -> None:
        """Put a Running or Releasing task of the snapshot on its node."""
        charge = self._load_on_node(task)
        if charge is not None:
            self._charge_queues(job, charge, +1)

    def load_tasks(self, jobs: list[Job]) -> None:
        """``load_task`` for every task of ``jobs`` (the session's), tasks pinned to GPU devices
        first (so that a task without a device never takes one of them), with the queues charged
        in bulk.

        Queue sums are rounded (``clean``) after every addition, so their value depends on the
        order of the additions unless every amount is a multiple of 1/4 (then every partial sum
        is exact and ``clean`` leaves it alone); only then are they added per queue at once,
        otherwise task by task as ``load_task`` does."""
        # Per leaf queue, as the tasks load: number of charges and the plain sums (all of them,
        # then the non-preemptible jobs'), with every amount charged (``exact_amounts``). The
        # running pods are the bulk of a large cluster: this loop is the session's cost, so it
        # builds nothing per pod (no placement, list entry or second pass): see ``Placements``.
        per_leaf: dict[str, list[float]] = {}
        seen: set[float] = set()
        pending: set[str] = set()
        load = self._load_on_node
        placements = self.placements
        unpinned: list[tuple[Task, Job]] = []  # loaded after every pinned task, in job order
        nodes = self.nodes
        running = _RUNNING
        # The last charge's amounts: a run of tasks of one shape adds them to ``seen`` once.
        last: tuple[float, float, float] | None = None
        np_job = False
        # Per leaf, its preemptible one-pod jobs' victim sums as they load, and the leaves where
        # some job is not such a pod (sums left to ``victim_sums``, which walks the jobs).
        victims: dict[str, LoadedVictims] = {}
        mixed: set[str] = set()
        # The jobs, in order, with a task given a stored placement here (every task off the fast
        # path below), and those that the stale-gang pass must read: these and the fast path's
        # gangs (``stored_jobs``, ``stale_candidates``).
        stored: list[Job] = []
        gangs: list[Job] = []
        # The last pod's node and the last job's leaf with their state: a run of pods on one
        # node, or of jobs of one leaf, looks them up once.
        last_node: str | None = None
        last_ns: NodeState | None = None
        last_leaf: str | None = None
        leaf_acc: list[float] = []
        leaf_vs: LoadedVictims | None = None
        for job in jobs:
            acc: list[float] | None = None  # the job's leaf sums, fetched at its first charge
            for task in job.tasks:
                gd = task.gpu_devices
                if not gd:
                    unpinned.append((task, job))
                    if not stored or stored[-1] is not job:
                        stored.append(job)
                    continue
                node = task.node
                if node is not last_node:
                    last_ns = nodes.get(node) if node is not None else None
                    last_node = node
                ns = last_ns
                state = task.state
                # ``is`` first: the snapshot's states are the enum's members (a str compares slower).
                if (
                    ns is not None
                    and (state is running or state == running)
                    and task.gpu >= 1.0
                    and (gd[0] if len(gd) == 1 else max(gd)) < len(ns.devices)
                ):
                    # The common case, inline (``_load_on_node`` does the same): a running
                    # whole-GPU task on its pinned devices; ``clean`` written out.
                    devs = ns.devices
                    for i in gd:
                        d = devs[i]
                        v = d.active + d.memory
                        d.active = v if v % 1.0 == 0.0 else round(v, 6)
                        d.whole = True
                    cpu, memory = task.cpu_millis, task.memory_mib
                    v = ns.cpu_idle - cpu
                    ns.cpu_idle = v if v % 1.0 == 0.0 else round(v, 6)
                    v = ns.mem_idle - memory
                    ns.mem_idle = v if v % 1.0 == 0.0 else round(v, 6)
                    ns.pods_idle -= 1
                    g = float(int(task.gpu))
                    ns.pinned_whole += g
                    if last is None or g != last[0] or cpu != last[1] or memory != last[2]:
                        last = (g, cpu, memory)
                        seen.update(last)
                    # No placement stored: it is made if and when one is read
                    # (``Placements.on_demand``), from the task and this same charge.
                    # ``_add_charge`` written out (a call per running pod is a tenth of this loop).
                    if acc is None:
                        leaf = job.queue
                        if leaf is not last_leaf:
                            leaf_acc = _leaf_sums(per_leaf, leaf)
                            leaf_vs = victims.get(leaf)
                            last_leaf = leaf
                        acc = leaf_acc
                        # ``Job.is_preemptible`` written out; the leaf's victim sums (``LoadedVictims``)
                        explicit = job.preemptible
                        np_job = not explicit if explicit is not None else job.priority >= 100
                        if len(job.tasks) > 1 or job.subgroups:
                            mixed.add(leaf)  # its chunks depend on its gang
                            if not gangs or gangs[-1] is not job:
                                gangs.append(job)
                        else:
                            least = job.min_available
                            if least is not None and least > 1:
                                gangs.append(job)  # one pod short of its own minimum
                            if not np_job:
                                vs = leaf_vs
                                if vs is None:
                                    vs = leaf_vs = victims[leaf] = LoadedVictims(first=job.key)
                                vs.jobs += 1
                                vs.gpu += g
                                if g > vs.biggest:
                                    vs.biggest = g
                                if job.last_start_s is not None:
                                    vs.started = True
                    acc[0] += 1
                    acc[1] += g
                    acc[2] += cpu
                    acc[3] += memory
                    if np_job:
                        acc[4] += g
                        acc[5] += cpu
                        acc[6] += memory
                    continue
                if not stored or stored[-1] is not job:
                    stored.append(job)
                charge = load(task)
                if charge is not None:
                    _add_charge(_leaf_sums(per_leaf, job.queue), charge, not job.is_preemptible, seen)
                    mixed.add(job.queue)
                elif placements[task.key].status == _PENDING:
                    pending.add(job.key)
                else:
                    mixed.add(job.queue)
            if stored and stored[-1] is job and (not gangs or gangs[-1] is not job):
                gangs.append(job)  # a task off the fast path: unknown to the pass's screen
        for task, job in unpinned:
            charge = load(task)
            if charge is not None:
                _add_charge(_leaf_sums(per_leaf, job.queue), charge, not job.is_preemptible, seen)
                mixed.add(job.queue)
            elif placements[task.key].status == _PENDING:
                pending.add(job.key)
            else:
                mixed.add(job.queue)
        placements.defer_running(jobs)  # the tasks of the fast path above have none stored
        if len(self.jobs) == len(jobs):  # (no two jobs of one key: ``self.jobs`` holds each)
            self.stored_jobs, self.stored_count = stored, len(placements)
            self.stale_candidates = gangs
        if not pending:
            self._pending_candidates = []
        else:
            # A pending task is off the fast path: its job is among ``stored`` (in job order).
            scan = stored if self.stored_jobs is stored else self.jobs.values()
            self._pending_candidates = [j for j in scan if j.key in pending]
        charges = sum(int(acc[0]) for acc in per_leaf.values())
        if charges < 2**20 and exact_amounts(seen):
            self._charge_in_bulk(per_leaf)
        else:
            # Task by task in load order (pinned tasks first): a loaded task is charged iff it runs.
            for pinned in (True, False):
                for job in jobs:
                    for task in job.tasks:
                        if bool(task.gpu_devices) == pinned and placements[task.key].status == running:
                            self._charge_queues(job, placements[task.key].charge, +1)
        stamp = self.queue_stamp
        self.loaded_victims = {
            leaf: (stamp.get(leaf, 0), sums) for leaf, sums in victims.items() if leaf not in mixed
        }

    def _charge_in_bulk(self, per_leaf: dict[str, list[float]]) -> None:
        """Charge the loaded tasks' sums per leaf queue (every amount exact in quarters)."""
        self.running_sums = per_leaf
        stamp = self.queue_stamp
        for leaf, acc in per_leaf.items():
            n = int(acc[0])
            for qs in self.ancestors(leaf):
                stamp[qs.name] = stamp.get(qs.name, 0) + n
                alloc, alloc_np = qs.allocated, qs.allocated_np
                for k, r in enumerate(RESOURCES, start=1):
                    alloc[r] = alloc[r] + acc[k]
                    alloc_np[r] = alloc_np[r] + acc[k + 3]

    def _load_on_node(self, task: Task) -> dict[str, float] | None:
        """Put a task of the snapshot in the state: Running or Releasing on its node, else
        Pending. Returns what its queue is to be charged (None: nothing, pending or releasing)."""
        state = task.state
        node = task.node
        ns = self.nodes.get(node) if node is not None else None
        if ns is None or (state != _RUNNING and state != _RELEASING):
            self.placements[task.key] = Placement(_PENDING)
            return None
        gd = task.gpu_devices
        releasing = state == _RELEASING
        fractional = task.is_fractional
        devs = ns.devices
        if gd and not fractional and max(gd) < len(devs):
            devices: tuple[int, ...] = gd  # every pinned device exists (``_initial_devices``)
        else:
            devices = self._initial_devices(ns, task)
        mem = 0.0
        if fractional:
            mem = self.device_need(task, ns.node.gpu_memory_mib)
        for i in devices:
            d = devs[i]
            amount = mem if fractional else d.memory
            if fractional and opens_group(d):
                ns.pods_idle -= 1  # the group's reservation pod
            if releasing:
                d.releasing = clean(d.releasing + amount)
                if fractional:  # a releasing member still counts in its group's used memory
                    d.group_rel = clean(d.group_rel + amount)
            else:
                d.active = clean(d.active + amount)
            if not fractional:
                d.whole = True
        cpu, memory = task.cpu_millis, task.memory_mib
        ns.cpu_idle = clean(ns.cpu_idle - cpu)
        ns.mem_idle = clean(ns.mem_idle - memory)
        ns.pods_idle -= 1
        if releasing:
            ns.cpu_rel = clean(ns.cpu_rel + cpu)
            ns.mem_rel = clean(ns.mem_rel + memory)
            ns.pods_rel += 1
        if task.gpu >= 1:
            gpu = float(int(task.gpu))  # whole_gpus
        elif fractional:
            gpu = self.gpu_fraction_on(task, ns.node.gpu_memory_mib)
        else:
            gpu = 0.0
        charge = {"gpu": gpu, "cpu": cpu, "memory": memory}
        self.placements[task.key] = Placement(state, task.node, devices, mem, charge)  # = ns.name
        return None if releasing else charge  # a releasing pod is no longer charged to its queue

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


_name = operator.attrgetter("name")


def _node_state(n: Node) -> NodeState:
    """A node of the snapshot with nothing on it: one idle device per GPU."""
    memory = float(n.gpu_memory_mib)
    device = Device
    return NodeState(
        n,
        [device(i, memory) for i in range(n.gpus)],
        float(n.cpu_millis),
        float(n.memory_mib),
        float(n.max_pods),
    )


def _leaf_sums(per_leaf: dict[str, list[float]], leaf: str) -> list[float]:
    """A leaf's sums in ``Session.running_sums``'s shape, made at its first charge."""
    acc = per_leaf.get(leaf)
    if acc is None:
        acc = per_leaf[leaf] = [0.0] * 7
    return acc


def _add_charge(acc: list[float], charge: dict[str, float], non_preemptible: bool, seen: set[float]) -> None:
    """Add one charge to its leaf's sums (``_leaf_sums``) and its amounts to ``seen``."""
    g, c, m = charge["gpu"], charge["cpu"], charge["memory"]
    seen.update((g, c, m))
    acc[0] += 1
    acc[1] += g
    acc[2] += c
    acc[3] += m
    if non_preemptible:
        acc[4] += g
        acc[5] += c
        acc[6] += m


def exact_sums(charges: Iterable[dict[str, float]]) -> bool:
    """Whether every amount is a multiple of 1/4 well inside the range where such sums are exact
    (so adding them in any order, rounded or not, gives the same float)."""
    seen: set[float] = set()
    for charge in charges:
        seen.update(charge.values())
    return exact_amounts(seen)


def exact_amounts(amounts: Iterable[float]) -> bool:
    """``exact_sums`` of the distinct amounts themselves."""
    # 2**30 per amount and under 2**20 amounts keep every sum below 2**50: exact in quarters.
    return all(abs(v) < 2.0**30 and float(v * 4).is_integer() for v in amounts)
