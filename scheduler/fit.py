"""Whether one task fits one node, and on which GPU devices (kai-semantics.md §4.6, §6): whole
GPUs, fractions of a device (and of several), GPU memory, CPU, memory and pod slots, idle now
or once releasing tasks leave."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scheduler import reasons, rules
from scheduler.gpu_ledger import NodeGpus
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import EPS, NodeState, opens_group

# What constrains where a task may go: its job (every placement rule), or only an equality node
# selector (callers that have no job, e.g. tests of the node search).
Rules = Job | Mapping[str, str]

# CPU (millicores) and memory (MiB) sums are rounded to 6 decimals at every step (``clean``), so
# a node filled exactly to its allocatable can show a few 1e-6 of drift; compare with this slack.
AMOUNT_EPS = 1e-4


@dataclass(slots=True)
class Fit:
    """Outcome of checking one task against one node."""

    ok: bool
    now: bool = False  # fits into idle resources: Allocated, not Pipelined
    devices: tuple[int, ...] = ()
    reason: str | None = None
    shares_group: bool = False  # lands on a device other fractional tasks already use
    # KAI's ``IsTaskAllocatable`` (the ``nodeavailability`` score): ``now`` except for a
    # fractional task, where a used GPU group counts its releasing memory (see ``_fraction_avail``)
    avail: bool = False


def _fraction_devices(
    session: Session, ns: NodeState, task: Task
) -> tuple[tuple[int, ...] | None, bool, bool, int]:
    """Pick the devices for a fractional task (``task.gpu_fraction_devices`` of them, each taking
    the same share): (indices, all fit now, any is an existing group, reservation slots it needs).

    A device that no fractional task holds yet opens a GPU group, and every group has a
    reservation pod on the node that takes a pod slot (kai-semantics §1.5)."""
    need = session.device_need(task, ns.node.gpu_memory_mib)
    spread = session.config.strategy(True) == "spread"
    candidates: list[tuple[float, int, bool]] = []
    for d in ns.devices:
        if need > d.memory + EPS:
            continue
        if d.is_group:
            if d.memory - d.active < need - EPS:
                continue
            # KAI's gpupack / gpuspread score: the group's used portion, its releasing members
            # included (``NodeInfo.GetUsedGpuPortion`` reads ``UsedSharedGPUsMemory``, which a
            # member keeps while Releasing): a group with releasing room ranks as full as it was
            used = (d.active + d.group_rel) / d.memory
            candidates.append((1 - used if spread else used, d.index, True))
        elif d.is_free:
            # KAI counts a free device as a whole GPU, idle or releasing (a group whose every
            # task is releasing is no group: ``IsTaskFitOnGpuGroup``'s ``isAllGpuReleased``), and
            # a task on a whole GPU is Allocated only when the node has enough idle ones
            # (``gpu_sharing/gpuSharing.go``, ``findGpuForSharingOnNode``): take idle devices
            # before releasing ones, so a releasing device is chosen only when no idle one is left.
            candidates.append((1.0 if spread else 0.0, d.index, False))
    count = task.fraction_device_count
    if len(candidates) < count:
        return None, False, False, 0
    # Best score first; among equal scores idle before releasing, then the lowest index.
    chosen = sorted(candidates, key=lambda c: (-c[0], not c[2] and ns.devices[c[1]].releasing > EPS))[:count]
    indices = tuple(sorted(c[1] for c in chosen))
    # Fits now: a group device with room beside its staying and releasing shares, or a free device
    # with nothing releasing on it (KAI: only the idle GPU count makes ``IsTaskAllocatable`` true
    # for a whole-GPU slot, ``node_info.go`` ``isTaskAllocatableOnNonAllocatedResources``).
    now = all(
        (ns.devices[i].releasing <= EPS)
        if ns.devices[i].is_free
        else ns.devices[i].memory - ns.devices[i].active - ns.devices[i].releasing >= need - EPS
        for i in indices
    )
    # A free device needs its group's reservation pod slot: a new one (idle room), or back from a
    # group whose tasks are all releasing (releasing room).
    opened = sum(1 for i in indices if ns.devices[i].is_free)
    now = now and ns.pods_idle >= 1 + sum(1 for i in indices if opens_group(ns.devices[i]))
    return indices, now, any(c[2] for c in chosen), opened


def _fraction_avail(session: Session, ns: NodeState, task: Task) -> bool:
    """KAI's ``node_info.IsTaskAllocatable`` for a fractional task, the test behind the
    ``nodeavailability`` node score (+1000): CPU, memory and the pod slot idle, and idle whole GPUs
    plus used GPU groups the task fits on at least its device count
    (``isTaskAllocatableOnNonAllocatedResources`` -> ``fractionTaskGpusAllocatableDeviceCount``).
    A group fits when its memory less what its staying tasks hold covers the task
    (``IsTaskFitOnGpuGroup`` -> ``enoughResourcesOnGpu``: memory - allocated + releasing): its
    releasing shares count as free, so the node scores as if the task fit now even where it is
    pipelined onto them (``gpuSharing.go`` pipelines on ``EnoughIdleResourcesOnGpu``, idle only:
    ``Fit.now``). A group whose every task is releasing fits nothing (``isAllGpuReleased``)."""
    if ns.pods_idle < 1:
        return False
    if ns.cpu_idle < task.cpu_millis - AMOUNT_EPS or ns.mem_idle < task.memory_mib - AMOUNT_EPS:
        return False
    need = session.device_need(task, ns.node.gpu_memory_mib)
    count = ns.piped_idle  # idle GPUs KAI's vector keeps (NodeState.piped_idle)
    for d in ns.devices:
        if d.active <= EPS:
            count += d.releasing <= EPS  # an idle whole GPU (KAI's IdleVector)
        elif not d.whole and d.memory - d.active >= need - EPS:
            count += 1
    return count >= task.fraction_device_count


def counters_of(session: Session, ns: NodeState, task: Task | None = None) -> NodeGpus | None:
    """KAI's GPU counters of the node where they may differ from its devices, while an action
    keeps them (``Session.gpu_ledger``, ``scheduler/gpu_ledger.py``), else None.

    KAI's node order and fit check read the node's counters, not devices: ``nodeavailability``
    (``IsTaskAllocatable``: the idle vector), ``nodeplacement``'s binpack (``NonAllocatedResource``:
    idle + releasing) and the check before each node is tried (``session.go`` ->
    ``IsTaskAllocatableOnReleasingOrIdle``: idle + releasing). Those counters drift from the
    devices during consolidation (pipelined tasks that take GPUs off releasing only, the Releasing
    pods a move leaves, phantom shares of discarded probes, un-evictions without a room check:
    ``gpu_ledger.py``), so where the ledger replays them the fit check and the scores read it;
    devices still decide which GPUs a task takes and whether it is Allocated or Pipelined."""
    ledger = session.gpu_ledger
    if ledger is None or not ledger.drifted(ns.name, task):
        return None  # an untouched node's counters are what its devices give (Ledger.drifted)
    return ledger.get(ns.name, touch=False)


def gpu_counters_below_zero(session: Session, ns: NodeState) -> tuple[bool, bool] | None:
    """For a task without GPUs, KAI's GPU counters of a drifted node (``counters_of``), else
    None: (idle + releasing below zero, idle below zero). Such a task is a regular request, so
    ``isTaskAllocatableOnNonAllocatedResources`` compares its whole resource vector, GPUs (0)
    included, with the node's (``lessEqualTaskToNodeResources`` -> ``ResourceVector.
    LessEqual``): a node whose idle + releasing GPU counters went below zero refuses it
    (``IsTaskAllocatableOnReleasingOrIdle``, the check before each node is tried; kai_diff seed
    151172: "releasing: <[1000 0 -2 0]>, idle: <[250000 ... 1 105]>"), and one whose idle counter
    did gets no ``nodeavailability`` +1000 (``IsTaskAllocatable``, the idle vector)."""
    counted = counters_of(session, ns)
    if counted is None:
        return None
    return counted.idle + counted.releasing < -EPS, counted.idle < -EPS


def _ledger_groups(session: Session, ns: NodeState, counted: NodeGpus, task: Task) -> int:
    """KAI's used GPU groups a fraction fits on (``fractionTaskGpusAllocatableDeviceCount`` ->
    ``IsTaskFitOnGpuGroup``: some memory used, memory less allocated plus releasing covers the
    task, not every member releasing), from the ledger's per-group memory."""
    need = int(session.device_need(task, ns.node.gpu_memory_mib))
    allocated = counted.allocated_shared
    releasing = counted.releasing_shared
    return sum(
        1
        for g, used in counted.used_shared.items()
        if used != 0
        and counted.device_memory - allocated.get(g, 0) + releasing.get(g, 0) - need >= 0
        and allocated.get(g, 0) != releasing.get(g, 0)
    )


def node_fit(session: Session, ns: NodeState, task: Task, selector: Rules) -> Fit:
    """Whether the task fits the node (into idle + releasing), and how."""
    if ns.node.unschedulable:
        return Fit(False, reason=reasons.NODE_UNSCHEDULABLE)
    if isinstance(selector, Job):
        node = ns.node
        # Both rules pass when neither node nor job has any (the usual case: skip the calls).
        if node.taints or selector.node_selector or selector.node_affinity or selector.anti_affinity_key:
            why = rules.static_reason(node, selector) or rules.anti_affinity_reason(session, node, selector)
            if why is not None:
                return Fit(False, reason=why)
    elif selector and not rules.selector_matches(ns.node, selector):
        return Fit(False, reason=reasons.NODE_SELECTOR)
    if ns.pods_idle + ns.pods_rel < 1:
        return Fit(False, reason=reasons.PODS_EXCEEDED)
    now = ns.pods_idle >= 1
    devices: tuple[int, ...] = ()
    group = False
    whole = task.whole_gpus
    avail_gpus = False
    below: tuple[bool, bool] | None = None  # a task without GPUs: gpu_counters_below_zero
    if whole:
        idle: list[int] = []
        rel: list[int] = []
        for d in ns.devices:
            if d.active <= EPS:
                (idle if d.releasing <= EPS else rel).append(d.index)
        if len(idle) + len(rel) < whole:
            return Fit(False, reason=reasons.not_enough("GPUs"))
        ledger = session.gpu_ledger
        if ledger is not None:
            # KAI's node counters, where reclaim or preempt keeps them (gpu_ledger.py): a
            # fraction's eviction moves them conditionally (gpu_sharing_node_info.go), so a node
            # can hold fewer idle plus releasing GPUs than free devices (kai_diff seed 111377)
            room = ledger.whole_room(ns.name)
            if room is not None and room < whole:
                return Fit(False, reason=reasons.not_enough("GPUs"))
        devices = tuple((idle + rel)[:whole])
        # KAI's nodeavailability reads its idle vector, which keeps GPUs pipelined tasks took
        # (NodeState.piped_idle).
        avail_gpus = len(idle) + ns.piped_idle >= whole
        counted = counters_of(session, ns, task)
        if counted is not None:
            # KAI's nodeavailability reads the idle counter (the fit check on idle + releasing
            # is whole_room's, above)
            avail_gpus = counted.idle >= whole - EPS
        # Allocated or Pipelined reads the same idle vector (allocate.go: allocateTaskToNode ->
        # IsTaskAllocatable), so a task is Allocated where pipelined tasks took the idle GPUs;
        # it then takes idle devices they hold, which move to releasing ones
        # (Statement.idle_from_pipelined; allocate.place_task pipelines it where they cannot).
        now = now and avail_gpus
    elif task.is_fractional:
        if not ns.devices:
            return Fit(False, reason=reasons.not_enough("GPUs"))
        chosen, dev_now, group, opened = _fraction_devices(session, ns, task)
        if chosen is None:
            what = "GPU memory" if task.gpu == 0 else "GPUs"
            return Fit(False, reason=reasons.not_enough(what))
        if opened and ns.pods_idle + ns.pods_rel < 1 + opened:
            return Fit(False, reason=reasons.PODS_EXCEEDED)
        counted = counters_of(session, ns, task)
        if counted is not None:
            # KAI's counters while consolidation runs: its fit check (nodeavailability below)
            groups = _ledger_groups(session, ns, counted, task)
            if math.floor(counted.idle + counted.releasing + EPS) + groups < task.fraction_device_count:
                return Fit(False, reason=reasons.not_enough("GPUs"))
        devices = chosen
        now = now and dev_now
    else:
        # KAI's gpusharingorder scores every node with a shared GPU group the task fits on; a task
        # without GPUs fits on any group (it asks for 0 MiB), so a CPU-only task is drawn to nodes
        # whose GPUs are shared, as in KAI (a whole-GPU task never fits a used shared device).
        group = ns.has_group
        below = gpu_counters_below_zero(session, ns)
        if below is not None and below[0]:
            return Fit(False, reason=reasons.not_enough("GPUs"))
    if ns.cpu_idle + ns.cpu_rel < task.cpu_millis - AMOUNT_EPS:
        return Fit(False, reason=reasons.not_enough("CPU cores"))
    if ns.mem_idle + ns.mem_rel < task.memory_mib - AMOUNT_EPS:
        return Fit(False, reason=reasons.not_enough("memory"))
    now = now and ns.cpu_idle >= task.cpu_millis - AMOUNT_EPS and ns.mem_idle >= task.memory_mib - AMOUNT_EPS
    if task.is_fractional:
        counted = counters_of(session, ns, task)
        if counted is None:
            avail = _fraction_avail(session, ns, task)
        else:
            groups = _ledger_groups(session, ns, counted, task)
            avail = (
                math.floor(counted.idle + EPS) + groups >= task.fraction_device_count
                and ns.pods_idle >= 1
                and ns.cpu_idle >= task.cpu_millis - AMOUNT_EPS
                and ns.mem_idle >= task.memory_mib - AMOUNT_EPS
            )
    elif whole:
        avail = (
            avail_gpus
            and ns.pods_idle >= 1
            and ns.cpu_idle >= task.cpu_millis - AMOUNT_EPS
            and ns.mem_idle >= task.memory_mib - AMOUNT_EPS
        )
    elif below is not None:
        avail = now and not below[1]
    else:
        # KAI's idle GPU counter is the idle devices plus piped_idle, which an evicted pipelined
        # task can take below zero: no nodeavailability +1000 then (gpu_counters_below_zero)
        avail = now and (ns.piped_idle >= 0 or ns.idle_whole_gpus() + ns.piped_idle >= 0)
    return Fit(True, now=now, devices=devices, shares_group=group, avail=avail)
