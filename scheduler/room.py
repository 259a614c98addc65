"""Where a pending job's pods would fit now, on the idle room a cycle leaves (``CycleResult.node_room``):
the job's own pool with a smaller per-pod GPU count, or another pool as asked. For the job page's
"what would change it"; it changes no decision.

A fit here is a sufficient one: each pod goes on an eligible node (the job's taints, node selector
and required node affinity, as the engine applies them: ``rules.static_reason``; the pool label is
what moving changes, so it is not held) whose idle whole GPUs, CPU, memory and pod slots cover it,
the fullest such node first. Jobs it cannot judge soundly (fractional GPUs, a required topology,
pods of different sizes) get no answer rather than a guess."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler import rules
from scheduler.fit import AMOUNT_EPS
from scheduler.model import Job, Task
from scheduler.result import NodeRoom


@dataclass(frozen=True)
class RoomShape:
    """The pending pods of a job: how many, and what each asks for (all alike)."""

    pods: int
    gpus: int
    cpu_millis: float
    memory_mib: float


def room_shape(job: Job, pending: list[Task]) -> RoomShape | None:
    """The shape of ``pending`` (the job's pending pods), None when the answer would be a guess."""
    if not pending or (job.topology is not None and job.topology.required):
        return None
    first = pending[0]
    if any(t.is_fractional for t in pending):
        return None
    asks = (first.gpu, first.cpu_millis, first.memory_mib)
    if any((t.gpu, t.cpu_millis, t.memory_mib) != asks for t in pending):
        return None
    return RoomShape(len(pending) + job.more_pending, first.whole_gpus, first.cpu_millis, first.memory_mib)


def room_eligible(job: Job, room: list[NodeRoom]) -> list[NodeRoom]:
    """The nodes the job's pods may go to by its placement rules."""
    return [r for r in room if rules.static_reason(r.node, job) is None]


def room_fits(job: Job, shape: RoomShape, room: list[NodeRoom]) -> list[str] | None:
    """The nodes that would take each of ``shape``'s pods now (one name per pod), or None."""
    if sum(r.idle_gpus for r in room) < shape.pods * shape.gpus:
        return None  # not enough idle GPUs in all: no need to place pod by pod
    left = {r.node.name: [r.idle_gpus, r.cpu_millis, r.memory_mib, r.pods] for r in room}
    by_name = {r.node.name: r for r in room}
    domains: set[str | None] = set()
    out: list[str] = []
    for _ in range(shape.pods):
        best: str | None = None
        for name, (g, c, m, p) in left.items():
            short = c < shape.cpu_millis - AMOUNT_EPS or m < shape.memory_mib - AMOUNT_EPS
            if g < shape.gpus or short or p < 1:
                continue
            if job.anti_affinity_key and rules.label(by_name[name].node, job.anti_affinity_key) in domains:
                continue
            if best is None or left[name][0] < left[best][0]:
                best = name
        if best is None:
            return None
        slot = left[best]
        slot[0] -= shape.gpus
        slot[1] -= shape.cpu_millis
        slot[2] -= shape.memory_mib
        slot[3] -= 1
        if job.anti_affinity_key:
            domains.add(rules.label(by_name[best].node, job.anti_affinity_key))
        out.append(best)
    return out


def largest_per_pod(job: Job, shape: RoomShape, room: list[NodeRoom]) -> int:
    """The most whole GPUs per pod, below what the pods ask, with which all of them fit now (0: none)."""
    for gpus in range(shape.gpus - 1, 0, -1):
        if room_fits(job, RoomShape(shape.pods, gpus, shape.cpu_millis, shape.memory_mib), room) is not None:
            return gpus
    return 0
