"""Virtual changes to a session with checkpoint and rollback (KAI's framework ``Statement``):
actions place, pipeline and evict tasks through one, then commit what they keep or roll back a
try (a gang that does not fit, a victim set that does not help)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler.gpu_ledger import Entry, NodeGpus, task_entry
from scheduler.model import Task, TaskState, clean
from scheduler.state import EPS, NodeState, Placement, opens_group

if TYPE_CHECKING:
    from scheduler.session import Session

# Task states as module constants: reading a member through the enum class costs ~15x a global.
_PENDING = TaskState.PENDING
_RUNNING = TaskState.RUNNING
_RELEASING = TaskState.RELEASING
_ALLOCATED = TaskState.ALLOCATED
_PIPELINED = TaskState.PIPELINED


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
        scalars = (ns.cpu_idle, ns.cpu_rel, ns.mem_idle, ns.mem_rel, ns.pods_idle, ns.pods_rel, ns.piped_idle)
        devs = [
            (d, d.active, d.releasing, d.whole, d.group_rel, d.group)
            for d in (ns.devices[i] for i in devices)
        ]

        def restore() -> None:
            session.touch_node(ns.name)
            (
                ns.cpu_idle,
                ns.cpu_rel,
                ns.mem_idle,
                ns.mem_rel,
                ns.pods_idle,
                ns.pods_rel,
                ns.piped_idle,
            ) = scalars
            for d, a, rel, w, grel, grp in devs:
                d.active, d.releasing, d.whole, d.group_rel, d.group = a, rel, w, grel, grp

        return restore

    def place(
        self, task: Task, node: str, devices: tuple[int, ...], pipelined: bool, unevicted: bool = False
    ) -> None:
        """Allocate (fits in idle) or pipeline (needs releasing resources) a task.

        ``unevicted``: the task goes back to the pipelined placement this scenario evicted it
        from (KAI's ``Statement.Unevict``), so KAI's idle count gets back the GPUs the eviction
        took off it (``evict``; ``NodeState.piped_idle``)."""
        s = self.session
        if s.gpu_ledger is not None:
            self._ledger_place(s.gpu_ledger.get(node), task, node, devices, pipelined)
        ns = s.nodes[node]
        job = s.task_job[task.key]
        restore_node = self._snapshot_node(ns, devices)
        old = s.placements.get(task.key) or s.placements.on_demand(task.key)
        if old is None:
            old = Placement(_PENDING)
        fractional = task.is_fractional
        mem = s.device_need(task, ns.node.gpu_memory_mib) if fractional else 0.0
        promised = 0.0
        for i in devices:
            d = ns.devices[i]
            if pipelined and not unevicted and d.is_idle and (not fractional or opens_group(d)):
                # KAI pipelines onto the releasing vector only: its idle GPUs stay (NodeState.piped_idle)
                ns.piped_idle += 1
            if fractional:
                if opens_group(d):  # a new GPU group: its reservation pod takes a pod slot
                    if pipelined and ns.pods_idle < 2:
                        ns.pods_rel -= 1
                    else:
                        ns.pods_idle -= 1
                elif d.is_free:  # a group whose tasks are all releasing: its reservation pod stays
                    ns.pods_rel -= 1
                if d.is_free:  # a freed whole-GPU device becomes a shared one
                    d.whole = False
                    # a new GPU group (KAI gives it a new id): the releasing members of the one
                    # before are no part of it
                    d.group += 1
                    d.group_rel = 0.0
                short = clean(mem - (d.memory - d.active - d.releasing))
                if short > EPS:  # the missing part is promised out of releasing memory
                    promised = max(promised, min(short, d.releasing))
                    d.releasing = clean(max(0.0, d.releasing - short))
                d.active = clean(d.active + mem)
            else:
                d.active, d.releasing, d.whole, d.group_rel = d.memory, 0.0, True, 0.0
        if unevicted:
            ns.piped_idle += task.whole_gpus
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
        status = _PIPELINED if pipelined else _ALLOCATED
        s.placements[task.key] = Placement(status, node, devices, mem, charge, promised, pipelined)
        s._charge_queues(job, charge, +1)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, charge, -1)
            s.placements[task.key] = old

        self._undo.append(undo)

    def idle_from_pipelined(self, ns: NodeState, devices: tuple[int, ...]) -> tuple[int, ...] | None:
        """The devices a whole-GPU task that KAI allocates (its idle GPU count covers it) takes:
        ``devices`` with each releasing one traded for an idle device that a task pipelined this
        cycle holds, which moves onto the releasing one; None when too few such devices exist.

        KAI counts whole GPUs per node and a pipelined task takes none off the idle count
        (``node_info.go: addTaskResources`` charges it to releasing), so ``IsTaskAllocatable``
        allocates a later task there (kai_diff seed 152102). The engine names devices: the
        allocated task must sit on idle ones, and a pipelined task waits for releasing ones all the
        same. A device is idle-held when no Releasing placement on the node lists it."""
        rel = [i for i in devices if ns.devices[i].releasing > EPS]
        if not rel:
            return devices
        s = self.session
        releasing: set[int] = set()
        piped: list[tuple[str, Placement]] = []
        for key, q in s.placements.items():
            if q.node != ns.name:
                continue
            if q.status == _RELEASING:
                releasing.update(q.devices)
            elif q.status == _PIPELINED and q.gpu_memory == 0 and q.devices:
                piped.append((key, q))
        for key, off in s.moved_off.items():
            # a task moved off the node this cycle still holds its devices there (Releasing)
            if ns.name in off:
                for t in s.task_job[key].tasks:
                    if t.key == key and t.node == ns.name:
                        releasing.update(t.gpu_devices)
        held = [(key, i) for key, q in piped for i in q.devices if i not in releasing and i not in devices]
        if len(held) < len(rel):
            return None
        trades = dict(zip(rel, held[: len(rel)], strict=True))
        restore_node = self._snapshot_node(ns, tuple(rel))
        before = {key: s.placements[key] for key, _ in trades.values()}
        for r, (key, i) in trades.items():
            q = s.placements[key]
            s.placements[key] = dataclasses.replace(q, devices=tuple(r if j == i else j for j in q.devices))
            d = ns.devices[r]
            d.active, d.releasing, d.whole, d.group_rel = d.memory, 0.0, True, 0.0
            ns.piped_idle -= 1  # the pipelined task now holds a releasing GPU, as KAI counts it

        def undo() -> None:
            restore_node()
            s.placements.update(before)

        self._undo.append(undo)
        return tuple(trades[i][1] if i in trades else i for i in devices)

    def set_status(self, task: Task, status: TaskState) -> None:
        """Change only the status label (e.g. a gang's allocations become pipelined)."""
        s = self.session
        p = s.placements[task.key]
        old = p.status
        p.status = status
        node = p.node
        if s.gpu_ledger is not None and node is not None:
            # the counters a whole-GPU fit reads may move (a fraction's): drop the node's cached fits
            s.touch_node(node)
            self._ledger_status(s.gpu_ledger.get(node), task.key, status)

        def undo() -> None:
            p.status = old
            if node is not None and s.gpu_ledger is not None:
                s.touch_node(node)

        self._undo.append(undo)

    def evict(self, task: Task) -> None:
        """Evict a placed task.

        A running task, and one allocated earlier in this cycle (a fraction too), becomes
        Releasing: its node resources turn into releasing resources and its queue is no longer
        charged (KAI's ``Statement.Evict`` sets any evicted task Releasing and its node counts it
        so; a fraction's share becomes its GPU group's releasing memory,
        ``gpu_sharing_node_info.go: addSharedGPUTaskResourcesPerPodGroup``). Fractions allocated
        this cycle went back to Pending until a used group's releasing memory counted for the
        node score as KAI counts it (``fit._fraction_avail``; kai_diff seeds 86905, 86582). A
        task pipelined earlier in this cycle (a moved one too) frees what it held and is Pending
        again; the result reports it Releasing on that node, as KAI does, unless it is placed
        again (it never ran there, so it holds nothing).
        """
        s = self.session
        p = s.placements[task.key]
        if p.node is None or p.status in (_PENDING, _RELEASING):
            return
        if s.gpu_ledger is not None:
            self._ledger_evict(s.gpu_ledger.get(p.node), task.key)
        if p.status == _PIPELINED:
            self._unplace(task)
            if task.whole_gpus:
                # KAI's Releasing pod takes its GPUs off the node's idle vector (node_info.go:
                # removeTaskResources of the Pipelined task, addTaskResources of the Releasing one);
                # the engine's devices give the room back as releasing (``_unplace``). A fraction's
                # count in KAI depends on its group (gpu_sharing_node_info.go): one that opened its
                # group on an idle GPU is ``_fraction_releasing_copy``; the others not modelled.
                s.nodes[p.node].piped_idle -= task.whole_gpus
            elif task.is_fractional:
                self._fraction_releasing_copy(s.nodes[p.node], p.devices)
            # KAI's Statement.Evict sets any evicted task Releasing, a pipelined one too
            # (framework/statement.go: Evict -> job.UpdateTaskStatus(Releasing), node.UpdateTask):
            # it ends the cycle Releasing on that node unless placed again. The engine keeps it
            # Pending inside the cycle (its re-placement rules read it so) and reports it
            # (``Session.evicted_pipelined``, read by ``cycle._collect``).
            evicted = s.evicted_pipelined
            before = evicted.get(task.key)
            evicted[task.key] = p.node

            def unrecord() -> None:
                if before is None:
                    evicted.pop(task.key, None)
                else:
                    evicted[task.key] = before

            self._undo.append(unrecord)
            return
        ns = s.nodes[p.node]
        job = s.task_job[task.key]
        restore_node = self._snapshot_node(ns, p.devices)
        old = p
        fractional = task.is_fractional
        devs = ns.devices
        for i in p.devices:
            d = devs[i]
            amount = p.gpu_memory if fractional else d.memory
            d.active = clean(max(0.0, d.active - amount))
            d.releasing = clean(d.releasing + amount)
            if not fractional:
                d.whole = True
                continue
            # still a member of its group, releasing (KAI's UsedSharedGPUsMemory keeps it)
            d.group_rel = clean(d.group_rel + amount)
            if d.active <= EPS:  # is_free: the group's last active task; its reservation pod goes with it
                ns.pods_rel += 1
        ns.cpu_rel = clean(ns.cpu_rel + task.cpu_millis)
        ns.mem_rel = clean(ns.mem_rel + task.memory_mib)
        ns.pods_rel += 1
        s._charge_queues(job, p.charge, -1)
        s.placements[task.key] = Placement(_RELEASING, p.node, p.devices, p.gpu_memory, p.charge)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, old.charge, +1)
            s.placements[task.key] = old

        self._undo.append(undo)

    @staticmethod
    def _fraction_releasing_copy(ns: NodeState, devices: tuple[int, ...]) -> None:
        """KAI's idle GPU count after a pipelined fraction that opened its GPU group on an idle
        GPU is evicted (kai_diff seed 106111). Its pipelining left KAI's idle vector as it was
        (``NodeState.piped_idle`` + 1); the engine's ``_unplace`` frees the device, which counts
        idle again, so that + 1 is taken back. KAI's node then holds the task's Releasing pod in
        that group, whose every member now releases: ``gpu_sharing_node_info.go:
        addSharedGPUTaskResourcesPerPodGroup`` (Releasing) takes one more GPU off the idle vector
        while idle + used GPUs exceed the node's GPUs, which holds while that + 1 was left."""
        for i in devices:
            if ns.devices[i].is_idle:
                ns.piped_idle -= 2 if ns.piped_idle >= 1 else 1

    def _unplace(self, task: Task) -> None:
        """Take back a placement made in this cycle: the task is Pending again."""
        s = self.session
        p = s.placements[task.key]
        assert p.node is not None
        ns = s.nodes[p.node]
        job = s.task_job[task.key]
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
        s.placements[task.key] = Placement(_PENDING)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, p.charge, +1)
            s.placements[task.key] = p

        self._undo.append(undo)

    def keep_own_devices(self, task: Task, own: tuple[int, ...]) -> None:
        """A whole-GPU task un-evicted onto other devices of its own node keeps its own devices.

        KAI counts whole GPUs per node and does not name them, so a whole-GPU victim whose own
        devices a preemptor took is un-evicted all the same (``Statement.Pipeline`` of a task
        already on the node) onto the GPUs left. The engine names devices, and a running pod
        cannot change GPUs: the task goes back onto its own devices, and what this cycle placed
        on them moves onto the devices the task was given (those hold the same releasing room
        that placement was counted against). Each pair of devices swaps its state."""
        s = self.session
        p = s.placements[task.key]
        assert p.node is not None
        given = [i for i in p.devices if i not in own]
        lost = [i for i in own if i not in p.devices]
        if not lost:
            return
        pairs = dict(zip(lost, given, strict=True))
        pairs.update({g: o for o, g in zip(lost, given, strict=True)})
        ns = s.nodes[p.node]
        restore_node = self._snapshot_node(ns, tuple(pairs))
        for o, g in zip(lost, given, strict=True):
            a, b = ns.devices[o], ns.devices[g]
            held = (a.active, a.releasing, a.whole, a.group_rel, a.group)
            a.active, a.releasing, a.whole, a.group_rel, a.group = (
                b.active,
                b.releasing,
                b.whole,
                b.group_rel,
                b.group,
            )
            b.active, b.releasing, b.whole, b.group_rel, b.group = held
        swap_groups = self._ledger_swap_groups(p.node, pairs)
        moved: list[tuple[str, Placement]] = [(task.key, p)]
        s.placements[task.key] = dataclasses.replace(p, devices=own)
        for key, q in list(s.placements.items()):
            if key == task.key or q.node != p.node or q.status not in (_ALLOCATED, _PIPELINED):
                continue
            if any(i in pairs for i in q.devices):
                moved.append((key, q))
                s.placements[key] = dataclasses.replace(q, devices=tuple(pairs.get(i, i) for i in q.devices))

        def undo() -> None:
            restore_node()
            swap_groups()
            for key, q in moved:
                s.placements[key] = q

        self._undo.append(undo)

    def _ledger_swap_groups(self, node: str, pairs: dict[int, int]) -> Callable[[], None]:
        """Swap the ledger's GPU groups of devices whose state ``keep_own_devices`` swapped, and
        return the swap back. KAI names a GPU group, not a device: a fraction the engine moved to
        another device is still in its group, and a fraction placed beside it later joins that
        group (kai_diff seed 153263: the ledger read the new device's own group, took a GPU off the
        releasing counter and drifted from KAI's)."""
        ledger = self.session.gpu_ledger
        ng = ledger.get(node) if ledger is not None else None
        if ng is None:
            return lambda: None
        groups = ng.device_groups

        def swap() -> None:
            # a device with no entry is in the group named by its index (NodeGpus.group_of)
            held = {i: groups.pop(i, [i]) for i in pairs}
            for i, opened in held.items():
                groups[pairs[i]] = opened

        swap()
        return swap

    def room_left(self, task: Task) -> bool:
        """Whether a task evicted in this cycle still has its own room (devices, CPU, memory, pod
        slot) as releasing resources on its node: nothing placed since took any of it."""
        s = self.session
        p = s.placements[task.key]
        if p.status != _RELEASING or p.node is None:
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

    def unevict(self, task: Task, status: TaskState = _RUNNING) -> bool:
        """Put a task evicted in this cycle back where it was, on its own devices; refused (False)
        when any of its room was taken since (e.g. a preemptor pipelined onto its GPU)."""
        s = self.session
        p = s.placements[task.key]
        if not self.room_left(task):
            return False
        assert p.node is not None
        if s.gpu_ledger is not None:
            self._ledger_unevict(s.gpu_ledger.get(p.node), task, p, status)
        ns = s.nodes[p.node]
        job = s.task_job[task.key]
        restore_node = self._snapshot_node(ns, p.devices)
        for i in p.devices:
            d = ns.devices[i]
            amount = p.gpu_memory if task.is_fractional else d.memory
            if task.is_fractional and d.is_free:  # the group is active again: its reservation stays
                ns.pods_rel -= 1
            if task.is_fractional:
                d.group_rel = clean(max(0.0, d.group_rel - amount))
            d.releasing = clean(max(0.0, d.releasing - amount))
            d.active = clean(d.active + amount)
        ns.cpu_rel = clean(ns.cpu_rel - task.cpu_millis)
        ns.mem_rel = clean(ns.mem_rel - task.memory_mib)
        ns.pods_rel -= 1
        s._charge_queues(job, p.charge, +1)
        s.placements[task.key] = Placement(status, p.node, p.devices, p.gpu_memory, p.charge)

        def undo() -> None:
            restore_node()
            s._charge_queues(job, p.charge, -1)
            s.placements[task.key] = p

        self._undo.append(undo)
        return True

    # ---- KAI's GPU counters (``Session.gpu_ledger``, kept while consolidation runs) --------
    # Each operation applies the node operation KAI's ``framework/statement.go`` does for it, and
    # its undo the one KAI's reverse operation does (``unpipeline`` / ``unallocate`` remove the
    # node's copy, ``unevict`` updates it or adds the task back), not a snapshot: that is how a
    # discarded probe leaves KAI's counters changed (``scheduler/gpu_ledger.py``).

    def _ledger_place(
        self, ng: NodeGpus | None, task: Task, node: str, devices: tuple[int, ...], pipelined: bool
    ) -> None:
        if ng is None:
            return
        key = task.key
        held = ng.entries.get(key)
        if held is None:  # Allocate / Pipeline: AddTask
            ng.add(
                key, task_entry(self.session, task, _PIPELINED if pipelined else _ALLOCATED, devices, node)
            )
            self._undo.append(lambda: ng.drop(key))
            return
        moved = task_entry(self.session, task, _PIPELINED, devices, node) if task.is_fractional else None
        if moved is not None and moved.groups != held.groups:
            # Pipeline in another GPU group of its node (another device, or its own device whose
            # group all releases, which KAI does not join: a new group): the node's copy is
            # replaced by ConsolidateSharedPodInfoToDifferentGPU without its Releasing share
            # being taken off; unpipeline removes the new copy only, and the old share stays.
            ng.add(key, moved, replace=True)
            self._undo.append(lambda: ng.drop(key))
        elif held.status == _RELEASING and held.before is not None:
            # Pipeline onto the node it was evicted from: Unevict, back to the status it had;
            # a discard re-does the eviction first (undoOperation of the undo)
            before = held.before
            ng.update(key, before)
            self._undo.append(lambda: ng.update(key, _RELEASING, before))

    def _ledger_status(self, ng: NodeGpus | None, key: str, status: TaskState) -> None:
        held = ng.entries.get(key) if ng is not None else None
        if ng is None or held is None or held.status == status:
            return
        old = held.status
        ng.update(key, status)
        self._undo.append(lambda: ng.update(key, old))

    def _ledger_evict(self, ng: NodeGpus | None, key: str) -> None:
        """``Statement.Evict``: the node's copy becomes Releasing (``UpdateTask``); undone by
        ``unevict``, which updates the copy back, or adds the task again when a move to another
        GPU group took the copy (its Releasing share is not taken off: it was never found)."""
        held = ng.entries.get(key) if ng is not None else None
        if ng is None or held is None:
            return
        ng.update(key, _RELEASING, held.status)
        self._undo.append(lambda: _unevict(ng, key, held))

    def _ledger_unevict(self, ng: NodeGpus | None, task: Task, p: Placement, status: TaskState) -> None:
        held = ng.entries.get(task.key) if ng is not None else None
        if ng is None or held is None or held.status != _RELEASING:
            return
        key = task.key
        ng.update(key, status)
        self._undo.append(lambda: ng.update(key, _RELEASING, status))


def _unevict(ng: NodeGpus, key: str, old: Entry) -> None:
    """KAI's ``Statement.unevict`` on the node: ``UpdateTask`` when the node still holds the
    task, else ``AddTask`` with the status and groups it had."""
    if key in ng.entries:
        ng.update(key, old.status, old.before)
    else:
        ng.add(key, Entry(old.status, old.groups, old.whole, old.memory, old.before, old.devices))
