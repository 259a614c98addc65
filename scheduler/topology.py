"""Candidate node sets for a topology-constrained job (kai-semantics.md §7, simplified to one
label key per level: ``required`` and/or ``preferred``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.model import Job, Task
from scheduler.session import NodeState, Session


@dataclass
class NodeSet:
    name: str  # domain value, or "cluster" for all nodes
    nodes: list[NodeState]


def _free_gpus(ns: NodeState) -> float:
    free = 0.0
    for d in ns.devices:
        if d.is_free:
            free += 1
        elif d.is_group:
            free += max(0.0, d.memory - d.active) / d.memory
    return free


def _fill_ratio(session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> float | None:
    """max_r need_r / free_r over the domain, None when it cannot hold the tasks."""
    need = {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}
    for t in tasks:
        for r, v in session.pending_request(t).items():
            need[r] += v
    usable = [ns for ns in nodes if ns.schedulable]
    free = {
        "gpu": sum(_free_gpus(ns) for ns in usable),
        "cpu": sum(ns.cpu_idle + ns.cpu_rel for ns in usable),
        "memory": sum(ns.mem_idle + ns.mem_rel for ns in usable),
    }
    ratio = 0.0
    for r, n in need.items():
        if n <= 0:
            continue
        if free[r] <= 0:
            return None
        ratio = max(ratio, n / free[r])
    return ratio if ratio <= 1 + 1e-9 else None


def _domains(nodes: Sequence[NodeState], key: str) -> dict[str, list[NodeState]]:
    out: dict[str, list[NodeState]] = {}
    for ns in nodes:
        value = ns.node.labels.get(key)
        if value is not None:
            out.setdefault(value, []).append(ns)
    return out


def _fitting(session: Session, domains: dict[str, list[NodeState]], tasks: Sequence[Task]) -> list[NodeSet]:
    scored = []
    for name, nodes in domains.items():
        ratio = _fill_ratio(session, nodes, tasks)
        if ratio is not None:
            scored.append((-ratio, name, nodes))
    scored.sort(key=lambda x: (x[0], x[1]))  # fullest domain first (binpack of domains)
    return [NodeSet(name, nodes) for _, name, nodes in scored]


def node_sets(session: Session, job: Job, tasks: Sequence[Task], nodes: Sequence[NodeState]) -> list[NodeSet]:
    """Node sets to try in order, narrowest level first; empty when a required level cannot fit."""
    topo = job.topology
    if topo is None or (topo.required is None and topo.preferred is None):
        return [NodeSet("cluster", list(nodes))]
    if topo.required:
        required = _domains(nodes, topo.required)
        running = {
            p.node
            for t in job.tasks
            if (p := session.placements.get(t.name)) and p.node and p.status.value != "Releasing"
        }
        if running:  # a job that already runs stays in the domain of its pods
            required = {k: v for k, v in required.items() if running & {ns.name for ns in v}}
        outer = _fitting(session, required, tasks)
    else:
        outer = [NodeSet("cluster", list(nodes))]
    sets: list[NodeSet] = []
    if topo.preferred:
        for top in outer:
            sets.extend(_fitting(session, _domains(top.nodes, topo.preferred), tasks))
    sets.extend(outer)
    return sets
