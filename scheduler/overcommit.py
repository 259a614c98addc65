"""Over-commit checks of a cycle's result against its snapshot (tests, benchmark, simulator).

A cycle's result holds two pictures of each node that must both fit:

* **now**: Running, Allocated and Releasing tasks (a releasing pod still holds its room until
  it is gone), counted only where the pod runs. A task that ends Releasing on a node it did not
  run on in the snapshot was placed (or moved) and evicted within the cycle (KAI's
  ``Statement.Evict`` makes any evicted task Releasing, a pipelined one too): no bind is made for
  that placement, so it holds nothing there now (KAI's node vectors count such a pipelined task
  twice, a bookkeeping the engine does not copy; a moved pod's old room was released by the move,
  as for any moved task);
* **planned**: Running, Allocated and Pipelined tasks (a pipelined task takes the room of
  releasing pods, so it may overlap them, but never a task that stays).

Each picture is checked per GPU device (one whole task, or fractions summing to at most one
device), per node (CPU, memory, pod slots, a shared device's reservation pod included) and per
queue (limits, on the planned picture; a queue already over its limit in the snapshot may not
grow further).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scheduler.model import RESOURCES, Job, Node, Snapshot, Task, TaskState
from scheduler.result import CycleResult

EPS = 1e-6
NOW = (TaskState.RUNNING, TaskState.ALLOCATED, TaskState.RELEASING)
PLANNED = (TaskState.RUNNING, TaskState.ALLOCATED, TaskState.PIPELINED)


def _device_share(task: Task, node: Node) -> float:
    """Part of one device a task holds (1 for a whole-GPU task)."""
    if task.gpu >= 1:
        return 1.0
    if task.gpu > 0:
        return task.gpu
    if task.gpu_memory_mib > 0 and node.gpu_memory_mib > 0:
        return task.gpu_memory_mib / node.gpu_memory_mib
    return 0.0


def _gpu_charge(task: Task, node: Node | None) -> float:
    if task.gpu >= 1:
        return float(int(task.gpu))
    if task.gpu > 0:
        return task.gpu * task.fraction_device_count
    if task.gpu_memory_mib > 0 and node is not None and node.gpu_memory_mib > 0:
        share = math.ceil(round(100 * task.gpu_memory_mib / node.gpu_memory_mib, 6)) / 100
        return share * task.fraction_device_count
    return 0.0


def _node_problems(
    snapshot: Snapshot, result: CycleResult, states: Iterable[TaskState], label: str
) -> list[str]:
    wanted = set(states)
    nodes = {n.name: n for n in snapshot.nodes}
    tasks = {t.key: t for j in snapshot.jobs for t in j.tasks}
    devices: dict[tuple[str, int], list[tuple[str, float]]] = {}
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    pods: dict[str, int] = {}
    # Shared devices: each has a reservation pod on its node, which takes a pod slot.
    shared: set[tuple[str, int]] = set()
    out: list[str] = []
    for o in result.tasks.values():
        if o.status not in wanted or o.node is None or o.key not in tasks:
            continue
        task = tasks[o.key]
        if o.status == TaskState.RELEASING and o.node != task.node:
            continue  # placed there and evicted within this cycle: never bound (module docstring)
        node = nodes.get(o.node)
        if node is None:
            out.append(f"{label}: {o.key} on unknown node {o.node}")
            continue
        cpu[o.node] = cpu.get(o.node, 0.0) + task.cpu_millis
        mem[o.node] = mem.get(o.node, 0.0) + task.memory_mib
        pods[o.node] = pods.get(o.node, 0) + 1
        share = _device_share(task, node)
        want = task.whole_gpus or (task.fraction_device_count if task.is_fractional else 0)
        if len(o.gpu_devices) != want:
            out.append(f"{label}: {o.key} holds {len(o.gpu_devices)} devices, needs {want}")
        for d in o.gpu_devices:
            if d >= node.gpus:
                out.append(f"{label}: {o.key} on device {d} of {o.node}, which has {node.gpus} GPUs")
            devices.setdefault((o.node, d), []).append((o.key, share))
            if task.is_fractional:
                shared.add((o.node, d))
    # Pods outside the scheduler (Node.external) hold their CPU, memory, slots and whole devices.
    for node in nodes.values():
        held = node.external
        if not held:
            continue
        cpu[node.name] = cpu.get(node.name, 0.0) + held.cpu_millis
        mem[node.name] = mem.get(node.name, 0.0) + held.memory_mib
        pods[node.name] = pods.get(node.name, 0) + held.pods
        ours = sum(1 for node_name, _ in devices if node_name == node.name)
        if held.gpus and ours + held.gpus > node.gpus:
            out.append(f"{label}: {node.name} uses {ours} GPUs besides {held.gpus} held by other pods "
                       f"> {node.gpus}")  # fmt: skip
    for (node_name, d), holders in sorted(devices.items()):
        if sum(s for _, s in holders) > 1 + EPS:
            names = ", ".join(n for n, _ in holders)
            out.append(f"{label}: GPU {d} of {node_name} double-booked by {names}")
    for name, used in sorted(cpu.items()):
        if used > nodes[name].cpu_millis + EPS:
            out.append(f"{label}: {name} CPU {used:g} > {nodes[name].cpu_millis:g}")
    for name, used in sorted(mem.items()):
        if used > nodes[name].memory_mib + EPS:
            out.append(f"{label}: {name} memory {used:g} > {nodes[name].memory_mib:g}")
    for name, _ in shared:
        pods[name] = pods.get(name, 0) + 1
    for name, n in sorted(pods.items()):
        if n > nodes[name].max_pods:
            out.append(f"{label}: {name} holds {n} pods > {nodes[name].max_pods}")
    return out


def _queue_charges(
    snapshot: Snapshot, status_of: dict[str, tuple[TaskState, str | None]], states: set[TaskState]
) -> dict[str, dict[str, float]]:
    nodes = {n.name: n for n in snapshot.nodes}
    parent = {q.name: q.parent for q in snapshot.queues}
    out: dict[str, dict[str, float]] = {}

    def charge(job: Job, task: Task, node: str | None) -> None:
        amounts = {
            "gpu": _gpu_charge(task, nodes.get(node or "")),
            "cpu": task.cpu_millis,
            "memory": task.memory_mib,
        }
        q: str | None = job.queue
        seen: set[str] = set()
        while q is not None and q in parent and q not in seen:
            seen.add(q)
            acc = out.setdefault(q, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                acc[r] += amounts[r]
            q = parent[q]

    for job in snapshot.jobs:
        for task in job.tasks:
            st = status_of.get(task.key)
            if st is not None and st[0] in states:
                charge(job, task, st[1])
    return out


def _queue_problems(snapshot: Snapshot, result: CycleResult) -> list[str]:
    before = _queue_charges(
        snapshot,
        {t.key: (t.state, t.node) for j in snapshot.jobs for t in j.tasks},
        {TaskState.RUNNING},
    )
    after = _queue_charges(snapshot, {o.key: (o.status, o.node) for o in result.tasks.values()}, set(PLANNED))
    out: list[str] = []
    for q in snapshot.queues:
        for r in RESOURCES:
            limit = q.res(r).limit
            if limit < 0:
                continue
            used = after.get(q.name, {}).get(r, 0.0)
            allowed = max(limit, before.get(q.name, {}).get(r, 0.0))
            if used > allowed + EPS:
                out.append(f"queue {q.name} {r} {used:g} over its limit {limit:g}")
    return out


def problems(snapshot: Snapshot, result: CycleResult) -> list[str]:
    """Everything over-committed in ``result`` (empty when the cycle is sound)."""
    return (
        _node_problems(snapshot, result, NOW, "now")
        + _node_problems(snapshot, result, PLANNED, "planned")
        + _queue_problems(snapshot, result)
    )


def double_booked_gpus(snapshot: Snapshot, result: CycleResult) -> list[str]:
    """GPU devices held beyond one device's worth, in either picture."""
    return [p for p in problems(snapshot, result) if "double-booked" in p]
