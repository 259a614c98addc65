"""KAI's per-node GPU counters, kept as KAI keeps them, for consolidation's allocatable-GPU check.

KAI's ``utils.IsEnoughGPUsAllocatableForJob`` (``actions/utils/action.go``, called from
``consolidation.go: attemptToConsolidateForPreemptor``) sums, over the nodes, KAI's idle and
releasing GPU counters (``node_info.GetSumOfIdleGPUs`` / ``GetSumOfReleasingGPUs``). Those
counters are not a function of where tasks are: they are the running result of every add and
remove of a task on the node (``node_info.go: addTaskResources`` / ``removeTaskResources``,
``gpu_sharing_node_info.go: addSharedGPUTaskResourcesPerPodGroup`` /
``removeSharedTaskResourcesPerPodGroup``), and two of KAI's statement operations do not undo
what they did:

* ``Statement.Pipeline`` of a fraction onto the node it is evicted from, in another GPU group,
  calls ``NodeInfo.ConsolidateSharedPodInfoToDifferentGPU`` (``addTask`` with
  ``allowTaskToExistOnDifferentGPU``): the node's entry of the Releasing task is replaced without
  its resources being taken off. ``unpipeline`` (on ``Discard`` / ``Rollback``) removes the new
  entry only, and ``unevict`` then adds the task back (``AddTask``, the entry being gone) on top
  of the Releasing share left behind. After a discarded probe the old group keeps a phantom
  Releasing share for the rest of the session.
* The whole-GPU counters of a shared GPU move only under conditions on the node's state
  (``IdleVector.Sub`` only while idle plus used GPUs exceed the node's GPUs, a GPU group marked
  releasing once, a pipelined fraction taking a GPU off the releasing counter when it opens a
  group or joins one whose members all release, and giving none back when removed from it), so
  with a phantom share the evictions and un-evictions that follow no longer cancel: the idle and
  releasing counters drift, and the sum can go below zero (kai_diff seed 50056: 2.72 before j16's
  search, -0.76 after it; seed 86109: 2.0 -> -11.25), after which KAI consolidates for no job.

A pipelined fraction also counts as KAI counts it: not in the group's allocated memory and out of
its releasing memory (a group whose releasing memory is 0 or below adds nothing).

The drift is no constant a node could keep: after the phantom, each later scenario that evicts
the task and puts it back moves the counters again (seed 86109: 1 more off the releasing counter
per scenario, -13 over one search), and the same asymmetry moves them without any phantom where a
group holds a pipelined fraction beside an allocated one (equivalence seed 12). So the node
operations themselves are replayed: the ledger is kept only while consolidation runs
(``Session.gpu_ledger``), built from the placements when the action starts, and ``Statement``
applies KAI's node operation for each of its own, undo included, so a discarded probe leaves what
KAI's leaves. It is read by consolidation's allocatable-GPU check and, while consolidation runs,
by the GPU part of every node fit and node score (``fit.counters_of``: KAI's fit check,
``nodeavailability`` and binpack read these counters; the devices still choose the GPUs and
Allocated or Pipelined). A KAI quirk, on by default: ``Config.kai_gpu_counter_drift``
(docs/kai-agreement.md, "KAI quirks").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.model import TaskState
from scheduler.state import EPS

if TYPE_CHECKING:
    from scheduler.model import Task
    from scheduler.session import Session

# A GPU group: a device's index while the group it holds is the first one there, then (device,
# n) for each group KAI opens anew on it (``findGpuForSharingOnNode`` gives a new group id).
Group = int | tuple[int, int]

# How far a node's counters agree with its devices (``Ledger._agrees``)
_AGREES, _AGREES_WHOLE_MIB, _DRIFTED = 0, 1, 2

_RELEASING = TaskState.RELEASING
_PIPELINED = TaskState.PIPELINED
_PENDING = TaskState.PENDING


@dataclass(slots=True)
class Entry:
    """A task as KAI's node holds it (``NodeInfo.PodInfos``): a copy taken when it was added."""

    status: TaskState
    groups: tuple[Group, ...]  # GPU groups of a fraction (``group_of``); () otherwise
    whole: float  # whole GPUs (0 for a fraction or a CPU-only task)
    memory: int  # MiB per group of a fraction (``GetResourceGpuMemory``)
    before: TaskState | None = None  # the status before an eviction (what ``unevict`` restores)
    devices: tuple[int, ...] = ()  # the engine's devices of a fraction


@dataclass
class NodeGpus:
    """One node's GPU counters (``NodeInfo``'s GPU entries of its idle, used and releasing
    vectors and its ``GpuSharingNodeInfo`` maps)."""

    gpus: int
    device_memory: int
    idle: float
    used: float = 0.0
    releasing: float = 0.0
    used_shared: dict[Group, int] = field(default_factory=dict)
    releasing_shared: dict[Group, int] = field(default_factory=dict)
    allocated_shared: dict[Group, int] = field(default_factory=dict)
    marked: set[Group] = field(default_factory=set)
    entries: dict[str, Entry] = field(default_factory=dict)
    # the groups opened on each device, oldest first (the device's own index first)
    device_groups: dict[int, list[Group]] = field(default_factory=dict)
    opened: int = 0

    def group_of(self, device: int) -> Group:
        """The GPU group a fraction placed on this device joins: the device's group while it has
        a member and not every member releases (``IsTaskFitOnGpuGroup``: ``!isAllGpuReleased``),
        else a new group (``gpu_sharing.findGpuForSharingOnNode`` gives a new group id)."""
        g = self._device_group(device)
        if self.used_shared.get(g, 0) != 0 and self.allocated_shared.get(g, 0) != self.releasing_shared.get(
            g, 0
        ):
            return g
        opened = self.device_groups.setdefault(device, [device])
        if g not in self.used_shared:
            return g
        self.opened += 1
        g = (device, self.opened)
        opened.append(g)
        return g

    def _device_group(self, device: int) -> Group:
        """The group the device's tasks are in: the newest opened on it that holds memory, else
        the newest. A group a discarded probe opened is empty again once the probe's task is
        taken off (``unpipeline``), and the device's tasks are back in the group before it, which
        keeps its id in KAI (a fraction placed there joins it: kai_diff seed 141347)."""
        opened = self.device_groups.get(device)
        if opened is None:
            return device
        used = self.used_shared
        for g in reversed(opened):
            if used.get(g, 0) != 0:
                return g
        return opened[-1]

    # ---- node_info.go: addTask / RemoveTask / UpdateTask ----------------------------------
    def add(self, key: str, entry: Entry, replace: bool = False) -> None:
        """``addTask``; ``replace``: ``ConsolidateSharedPodInfoToDifferentGPU``, which drops the
        old entry without taking its resources off."""
        if key in self.entries and not replace:
            return  # KAI refuses: "already on node"
        self.entries[key] = entry
        if entry.whole:
            self.used += entry.whole
            if entry.status == _RELEASING:
                self.releasing += entry.whole
                self.idle -= entry.whole
            elif entry.status == _PIPELINED:
                self.releasing -= entry.whole
            else:
                self.idle -= entry.whole
        for g in entry.groups:
            self._add_shared(entry, g)

    def remove(self, key: str) -> Entry | None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return None
        if entry.whole:
            self.used -= entry.whole
            if entry.status == _RELEASING:
                self.releasing -= entry.whole
                self.idle += entry.whole
            elif entry.status == _PIPELINED:
                self.releasing += entry.whole
            else:
                self.idle += entry.whole
        for g in entry.groups:
            self._remove_shared(entry, g)
        return entry

    def drop(self, key: str) -> None:
        """``RemoveTask`` as an undo step (``unpipeline``, ``unallocate``)."""
        self.remove(key)

    def update(self, key: str, status: TaskState, before: TaskState | None = None) -> None:
        """``UpdateTask``: remove the node's copy, add the task with its new status."""
        old = self.entries.get(key)
        if old is not None and not old.groups:
            # a whole-GPU or CPU-only task: only its two statuses move the counters (the same
            # arithmetic as ``remove`` then ``add``, without the shared-GPU steps)
            w = old.whole
            if w:
                if old.status == _RELEASING:
                    self.releasing -= w
                    self.idle += w
                elif old.status == _PIPELINED:
                    self.releasing += w
                else:
                    self.idle += w
                if status == _RELEASING:
                    self.releasing += w
                    self.idle -= w
                elif status == _PIPELINED:
                    self.releasing -= w
                else:
                    self.idle -= w
            self.entries[key] = Entry(status, (), w, old.memory, before, old.devices)
            return
        old = self.remove(key)
        if old is not None:
            self.add(key, Entry(status, old.groups, old.whole, old.memory, before, old.devices))

    # ---- gpu_sharing_node_info.go ---------------------------------------------------------
    def _used_gpus(self) -> int:
        """``getNumberOfUsedGPUs``."""
        return int(self.used) + sum(1 for v in self.used_shared.values() if v > 0)

    def _add_shared(self, e: Entry, g: Group) -> None:
        """``addSharedGPUTaskResourcesPerPodGroup``."""
        m = e.memory
        used = self.used_shared[g] = self.used_shared.get(g, 0) + m
        if e.status == _RELEASING:
            rel = self.releasing_shared[g] = self.releasing_shared.get(g, 0) + m
            self.allocated_shared[g] = self.allocated_shared.get(g, 0) + m
            if used == rel:
                if g not in self.marked:
                    self.releasing += 1
                    self.marked.add(g)
                if self.gpus < int(self.idle) + self._used_gpus():
                    self.idle -= 1
        elif e.status == _PIPELINED:
            rel = self.releasing_shared[g] = self.releasing_shared.get(g, 0) - m
            if used - m == rel + m:
                self.releasing -= 1
        else:
            self.allocated_shared[g] = self.allocated_shared.get(g, 0) + m
            if used <= m and self.gpus < int(self.idle) + self._used_gpus():
                self.idle -= 1
            if g in self.marked:
                self.releasing -= 1
                self.marked.discard(g)

    def _remove_shared(self, e: Entry, g: Group) -> None:
        """``removeSharedTaskResourcesPerPodGroup``."""
        m = e.memory
        used = self.used_shared[g] = self.used_shared.get(g, 0) - m
        if e.status == _RELEASING:
            self.releasing_shared[g] = self.releasing_shared.get(g, 0) - m
            self.allocated_shared[g] = self.allocated_shared.get(g, 0) - m
            if used <= 0:
                if self.gpus >= int(self.idle) + self._used_gpus():
                    self.idle += 1
                if g in self.marked:
                    self.releasing -= 1
                    self.marked.discard(g)
        elif e.status == _PIPELINED:
            rel = self.releasing_shared[g] = self.releasing_shared.get(g, 0) + m
            # isPipelinedToReleasingGpu, read after the removal
            if (used + m == rel - m) or (used == 0 and rel == 0):
                self.releasing += 1
        else:
            self.allocated_shared[g] = self.allocated_shared.get(g, 0) - m
            if used <= 0 and self.gpus >= int(self.idle) + self._used_gpus():
                self.idle += 1
            if self._all_releasing(g) and g not in self.marked:
                self.releasing += 1
                self.marked.add(g)

    def _all_releasing(self, g: Group) -> bool:
        """``isGpuReleasingFromSharedTasks``."""
        used = self.used_shared.get(g, 0)
        return used != 0 and g in self.releasing_shared and self.releasing_shared[g] == used

    def _portion(self, memory: int) -> float:
        """``getGpuMemoryFractionalOnNode``: rounded up to hundredths."""
        return math.ceil(memory / self.device_memory * 100) / 100

    def sums(self) -> tuple[float, float]:
        """``GetSumOfIdleGPUs`` plus ``GetSumOfReleasingGPUs``: GPUs and their MiB."""
        gpus = self.idle + self.releasing
        memory = (int(self.idle) + int(self.releasing)) * self.device_memory
        if self.device_memory <= 0:
            return gpus, float(memory)
        for allocated in self.allocated_shared.values():
            if allocated > 0:
                gpus += 1 - self._portion(allocated)
                memory += self.device_memory - allocated
        for g, rel in self.releasing_shared.items():
            if rel > 0 and not self._all_releasing(g):
                gpus += self._portion(rel)
                memory += rel
        return gpus, float(memory)


def task_entry(session: Session, task: Task, status: TaskState, devices: tuple[int, ...], node: str) -> Entry:
    """A task as KAI's node would hold it: a fraction by its groups and its MiB per group
    (``GetResourceGpuMemory``: the GPU-memory request, else the portion of the node's device
    memory, truncated), a whole-GPU task by its GPU count."""
    if task.is_fractional:
        memory = int(session.device_need(task, session.nodes[node].node.gpu_memory_mib))
        ng = session.gpu_ledger[node] if session.gpu_ledger is not None else None
        groups = tuple(ng.group_of(d) for d in devices) if ng is not None else tuple(devices)
        return Entry(status, groups, 0.0, memory, devices=tuple(devices))
    return Entry(status, (), float(task.whole_gpus), 0)


def build(session: Session) -> Ledger:
    """The counters as KAI's session builds them (every task on a node added in turn), each
    node's made when first read (``Ledger``)."""
    return Ledger(session)


def keep(session: Session) -> None:
    """Keep the ledger from this action on (consolidation, reclaim, preempt): its statements
    replay KAI's node operations and the fits and sums that KAI reads off its node counters read
    the ledger. KAI's counters belong to the session, so once made the ledger runs on through the
    later actions of the cycle (reclaim's changes are preempt's starting counters: kai_diff seed
    140961) and goes with the session. Off with ``Config.kai_gpu_counter_drift``."""
    if session.config.kai_gpu_counter_drift and session.gpu_ledger is None:
        session.gpu_ledger = build(session)


class Ledger:
    """Every node's ``NodeGpus`` as KAI's session builds them, each made when first read.

    KAI adds every task on a node in turn, in job order; but the running pods ``Session.
    load_tasks`` loaded on their pinned whole GPUs with no stored placement (``state.
    Placements``, the bulk of a large cluster) change the idle and used counters only, by the
    same whole number each way, and every condition of the node's operations reads their sum
    (``int(idle)`` plus ``_used_gpus``): such an add gives the same counters wherever it comes in
    the order. So a node's counters start from those pods' GPUs (``NodeState.pinned_whole``, less
    the ones whose placement has been made since, ``Placements.made``) and add the tasks with a
    stored placement in job order; a node holding none of those is summed without an object
    (``sums``), and the pods' own entries are added only once a statement touches the node
    (``get``). At 5,000 nodes the whole build was 0.13 s of a 2 s cycle whose consolidation
    simulates nothing."""

    def __init__(self, session: Session) -> None:
        self._session = session
        placements = session.placements
        nodes = session.nodes
        self._built: dict[str, NodeGpus] = {}
        self._drift: set[str] = set()  # nodes whose counters may answer otherwise (``drifted``)
        self._shared: set[str] = set()  # nodes holding fractions that agree for whole-MiB shares
        self._shared_labels: dict[float, int] = {}  # how many of those per device memory label
        self._whole_needs: dict[tuple[float, float, float], bool] = {}  # ``_whole_need`` by shape
        self._unchecked: set[str] = set()  # nodes to check again (``get``)
        self._complete: set[str] = set()  # nodes whose loaded pods have their entries
        self._loaded: dict[str, list[Task]] | None = None  # those pods by node, once one is touched
        self._made_before = len(placements.made)  # placements made on demand before the ledger
        # per node, the whole GPUs of its loaded pods whose placement has been made on demand
        self._made_gpus: dict[str, float] = {}
        for t in placements.made:
            if t.node is not None:
                self._made_gpus[t.node] = self._made_gpus.get(t.node, 0.0) + float(int(t.gpu))
        # tasks with a stored placement on a node, by node, in the job order KAI adds them in
        pending = _PENDING
        keys = {
            k for k, p in placements.items() if p.node is not None and p.status != pending and p.node in nodes
        }
        self._stored: dict[str, list[Task]] = {}
        if keys:
            task_job = session.task_job
            owners = {task_job[k].key for k in keys}
            for job in session.jobs.values():
                if job.key in owners:
                    for t in job.tasks:
                        if t.key in keys:
                            self._stored.setdefault(placements[t.key].node or "", []).append(t)
        self._unchecked.update(self._stored)

    def __contains__(self, name: object) -> bool:
        return name in self._session.nodes

    def __getitem__(self, name: str) -> NodeGpus:
        ng = self.get(name)
        if ng is None:
            raise KeyError(name)
        return ng

    def drifted(self, name: str, task: Task | None = None) -> bool:
        """Whether the node's counters may give another answer than its devices (``_agrees``,
        checked again after each statement operation on the node); with ``task``, for that
        task's fit (a node with fractions agrees only for a task whose share is whole MiB)."""
        if name in self._unchecked:
            self._check(name)
        if name in self._drift:
            return True
        if task is None or name not in self._shared:
            return False
        return not self._whole_need(task, self._session.nodes[name].node.gpu_memory_mib)

    def drifted_nodes(self, task: Task | None = None) -> set[str]:
        """The nodes ``drifted`` names (for ``task``)."""
        if self._unchecked:
            for name in list(self._unchecked):
                self._check(name)
        if task is None or not task.is_fractional:
            return self._drift
        odd = {label for label, n in self._shared_labels.items() if n and not self._whole_need(task, label)}
        if not odd:
            return self._drift
        nodes = self._session.nodes
        return self._drift.union(name for name in self._shared if nodes[name].node.gpu_memory_mib in odd)

    def _whole_need(self, task: Task, label: float) -> bool:
        """Whether the task's share of a device of this memory label is whole MiB: the counters
        keep it truncated (``task_entry``, as KAI's ``GetResourceGpuMemory``), the devices
        unrounded."""
        if not task.is_fractional:
            return True
        key = (task.gpu, task.gpu_memory_mib, label)
        whole = self._whole_needs.get(key)
        if whole is None:
            need = self._session.device_need(task, label)
            whole = self._whole_needs[key] = need == int(need)
        return whole

    def _check(self, name: str) -> None:
        self._unchecked.discard(name)
        self._drift.discard(name)
        label = self._session.nodes[name].node.gpu_memory_mib
        if name in self._shared:
            self._shared.discard(name)
            self._shared_labels[label] -= 1
        agrees = self._agrees(name)
        if agrees == _DRIFTED:
            self._drift.add(name)
        elif agrees == _AGREES_WHOLE_MIB:
            self._shared.add(name)
            self._shared_labels[label] = self._shared_labels.get(label, 0) + 1

    def _agrees(self, name: str) -> int:
        """Whether every read of ``fit.counters_of`` (fit check, ``nodeavailability``, binpack)
        gives the devices' answer on the node: ``_AGREES``, ``_AGREES_WHOLE_MIB`` (for a task
        whose share is whole MiB: the node holds fractions) or ``_DRIFTED``.

        Those reads are the idle and releasing counters, which must be the idle devices plus
        ``piped_idle`` and the free whole GPUs (the whole-GPU fit and scores, and the free GPUs a
        fraction may open), and the GPU groups a fraction fits on (``_ledger_groups``): a used
        group not all releasing, whose memory less allocated plus releasing covers the task.
        That is the devices' count (``_fraction_devices``, ``_fraction_avail``: a shared device
        whose memory less its active memory covers it) whenever the groups' allocated less
        releasing memory are the shared devices' active memory, one for one, and the counters'
        device memory the devices': allocated less releasing is what the group's staying and
        pipelined members hold (a Releasing member counts in both, a pipelined one is off
        releasing), whatever releases or was pipelined there. The counters keep each share
        truncated to whole MiB (``task_entry``), so a task with a share of a fraction of a MiB may
        still compare otherwise. A node never made holds only loaded whole-GPU pods: it agrees."""
        ng = self._built.get(name)
        if ng is None and name not in self._stored:
            return _AGREES
        ng = self._counters(name)
        if ng is None:
            return _AGREES
        ns = self._session.nodes[name]
        idle = free = 0
        shared: list[float] = []
        for d in ns.devices:  # one pass: NodeState.idle_whole_gpus, free_whole_gpus, shared devices
            if d.active <= EPS:
                free += 1
                idle += d.releasing <= EPS
            elif not d.whole:
                shared.append(d.active)
        if ng.idle != idle + ns.piped_idle or ng.idle + ng.releasing != free:
            return _DRIFTED
        if not ng.used_shared:
            return _DRIFTED if shared else _AGREES
        allocated, releasing = ng.allocated_shared, ng.releasing_shared
        rooms = [
            allocated.get(g, 0) - releasing.get(g, 0)
            for g, used in ng.used_shared.items()
            if used != 0 and allocated.get(g, 0) != releasing.get(g, 0)
        ]
        if len(rooms) != len(shared) or sorted(rooms) != sorted(shared):
            return _DRIFTED
        if not rooms:
            return _AGREES
        if any(d.memory != ng.device_memory for d in ns.devices):
            return _DRIFTED
        return _AGREES_WHOLE_MIB

    def get(self, name: str, touch: bool = True) -> NodeGpus | None:
        """A node's counters with every task's entry, for a statement to change (``touch``: its
        agreement with the devices is checked again at the next read)."""
        if touch:
            self._unchecked.add(name)
        if name in self._complete:
            return self._built[name]
        ng = self._counters(name)
        if ng is not None:
            self._complete.add(name)
            for t in self._loaded_pods().get(name, ()):
                ng.entries.setdefault(t.key, Entry(TaskState.RUNNING, (), float(t.whole_gpus), 0))
        return ng

    def whole_room(self, name: str) -> float | None:
        """KAI's idle plus releasing GPU counters of a node (``NodeInfo.nonAllocatedVector``),
        which ``IsTaskAllocatableOnReleasingOrIdle`` compares a whole-GPU task with; None for a
        node holding only loaded pods (its counters are its free devices)."""
        ng = self._built.get(name)
        if ng is None:
            if name not in self._stored:
                return None
            ng = self._counters(name)
            if ng is None:
                return None
        return ng.idle + ng.releasing

    def sums(self, name: str) -> tuple[float, float]:
        """``NodeGpus.sums`` of a node; one holding only loaded pods is summed as its counters
        would be (idle counts its free GPUs, nothing is releasing or shared)."""
        ng = self._built.get(name)
        if ng is None:
            if name in self._stored:
                return self._counters(name).sums()  # type: ignore[union-attr]
            ns = self._session.nodes[name]
            idle = self._idle(name)
            return idle, float(int(idle) * int(ns.node.gpu_memory_mib))
        return ng.sums()

    def total(self) -> tuple[float, float]:
        """``sums`` added over the schedulable nodes in order (``utils.getSumOfAvailableGPUs``),
        a node holding only loaded pods summed inline (most of a large pool)."""
        gpus = 0.0
        memory = 0.0
        built, stored, made = self._built, self._stored, self._made_gpus
        for name, ns in self._session.nodes.items():
            node = ns.node
            if node.unschedulable:
                continue
            if name in built or name in stored:
                g, m = self.sums(name)
            else:
                held = node.external.gpus if node.external else 0
                g = float(node.gpus) - held - (ns.pinned_whole - made.get(name, 0.0))
                m = float(int(g) * int(node.gpu_memory_mib))
            gpus += g
            memory += m
        return gpus, memory

    def _idle(self, name: str) -> float:
        """The node's idle counter before the tasks with a stored placement are added."""
        ns = self._session.nodes[name]
        held = ns.node.external.gpus if ns.node.external else 0
        return float(ns.node.gpus) - held - self._pinned(name)

    def _pinned(self, name: str) -> float:
        return self._session.nodes[name].pinned_whole - self._made_gpus.get(name, 0.0)

    def _counters(self, name: str) -> NodeGpus | None:
        ng = self._built.get(name)
        if ng is not None:
            return ng
        session = self._session
        ns = session.nodes.get(name)
        if ns is None:
            return None
        held = ns.node.external.gpus if ns.node.external else 0
        ng = NodeGpus(ns.node.gpus, int(ns.node.gpu_memory_mib), self._idle(name))
        ng.used = held + self._pinned(name)
        placements = session.placements
        for task in self._stored.get(name, ()):
            p = placements[task.key]
            ng.add(task.key, _loaded_entry(session, task, p.status, p.devices, name))
        self._built[name] = ng
        return ng

    def _loaded_pods(self) -> dict[str, list[Task]]:
        """The pods loaded with no stored placement when the ledger was made, by node."""
        if self._loaded is None:
            placements = self._session.placements
            loaded: dict[str, list[Task]] = {}
            if placements.deferring:
                for job in self._session.jobs.values():
                    for t in job.tasks:
                        if t.key not in placements and t.node is not None:
                            loaded.setdefault(t.node, []).append(t)
                for t in placements.made[self._made_before :]:
                    if t.node is not None:
                        loaded.setdefault(t.node, []).append(t)
            self._loaded = loaded
        return self._loaded


def _loaded_entry(
    session: Session, task: Task, status: TaskState, devices: tuple[int, ...], node: str
) -> Entry:
    """A task on its node when the ledger is made: a fraction keeps the group it is in, its
    device's."""
    if task.is_fractional:
        memory = int(session.device_need(task, session.nodes[node].node.gpu_memory_mib))
        return Entry(status, tuple(devices), 0.0, memory, devices=tuple(devices))
    return Entry(status, (), float(task.whole_gpus), 0)
