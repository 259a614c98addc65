"""Cheap capacity screening: free room on the nodes a preemptor may use, as victims are added
virtually - a necessary condition checked before any scenario is simulated (as KAI's
accumulated scenario filter ``idle_gpus`` skips scenarios that cannot free enough GPUs)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler import gang, rules
from scheduler.fit import AMOUNT_EPS
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import EPS, NodeState

ACTIVE = gang.ACTIVE_ALLOCATED


class FreeTracker:
    """Free capacity on the nodes the preemptor may use, as victims are added virtually.

    ``ok()`` is a necessary condition for the preemptor's tasks to fit: enough GPUs, CPU and
    memory in total, and for every whole-GPU size g enough nodes-slots of g free devices.
    """

    def __init__(self, session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> None:
        self.session = session
        self.nodes = {ns.name: ns for ns in nodes}
        self.active: dict[str, list[float]] = {}
        self.need_gpu = need_gpu(session, tasks)
        self.need_cpu = sum(t.cpu_millis for t in tasks)
        self.need_mem = sum(t.memory_mib for t in tasks)
        self.need_pods = len(tasks)
        self.sizes = sorted({t.whole_gpus for t in tasks if t.whole_gpus})
        self.count_at_least = {g: sum(1 for t in tasks if t.whole_gpus >= g) for g in self.sizes}
        self.free_gpu = 0.0
        self.free_cpu = 0.0
        self.free_mem = 0.0
        self.free_pods = 0.0
        self.free_dev: dict[str, int] = {}
        self.slots = dict.fromkeys(self.sizes, 0)
        for ns in nodes:
            free = 0
            for d in ns.devices:
                self.free_gpu += max(0.0, d.memory - d.active) / d.memory if d.memory > 0 else 0.0
                free += 1 if d.is_free else 0
            self.free_dev[ns.name] = free
            for g in self.sizes:
                self.slots[g] += free // g
            self.free_cpu += ns.cpu_idle + ns.cpu_rel
            self.free_mem += ns.mem_idle + ns.mem_rel
            self.free_pods += ns.pods_idle + ns.pods_rel

    def add(self, task: Task) -> None:
        p = self.session.placements[task.key]
        if p.node not in self.nodes or p.status not in ACTIVE:
            return
        ns = self.nodes[p.node]
        self.free_cpu += task.cpu_millis
        self.free_mem += task.memory_mib
        self.free_pods += 1
        act = self.active.get(ns.name)
        if act is None:
            act = [d.active for d in ns.devices]
            self.active[ns.name] = act
        changed = False
        for i in p.devices:
            d = ns.devices[i]
            amount = p.gpu_memory if task.is_fractional else d.memory
            was_free = act[i] <= EPS
            act[i] = max(0.0, act[i] - amount)
            self.free_gpu += amount / d.memory if d.memory > 0 else 0.0
            if not was_free and act[i] <= EPS:
                changed = True
                old = self.free_dev[ns.name]
                self.free_dev[ns.name] = old + 1
                for g in self.sizes:
                    self.slots[g] += (old + 1) // g - old // g
        del changed

    def ok(self) -> bool:
        if self.free_gpu + EPS < self.need_gpu or self.free_pods < self.need_pods:
            return False
        if self.free_cpu + AMOUNT_EPS < self.need_cpu or self.free_mem + AMOUNT_EPS < self.need_mem:
            return False
        return all(self.slots[g] >= self.count_at_least[g] for g in self.sizes)


def usable_nodes(session: Session, job: Job) -> list[NodeState]:
    """Nodes the job's pods may ever use: schedulable, tolerated, matching selector and affinity."""
    return [
        ns for ns in session.nodes.values() if ns.schedulable and rules.static_reason(ns.node, job) is None
    ]


def need_gpu(session: Session, tasks: Sequence[Task]) -> float:
    """GPUs the tasks need at least, as ``FreeTracker`` counts them."""
    need = 0.0
    mem_max = session.max_device_memory or 1.0
    for t in tasks:
        if t.whole_gpus:
            need += t.whole_gpus
        elif 0 < t.gpu < 1:
            need += t.gpu * t.fraction_device_count
        elif t.gpu_memory_mib > 0:
            need += t.gpu_memory_mib / mem_max * t.fraction_device_count
    return need
