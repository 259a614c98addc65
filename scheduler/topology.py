"""Candidate node sets for a topology-constrained job (kai-semantics.md §7, simplified to one
label key per level: ``required`` and/or ``preferred``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler import reasons, rules
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import EPS, NodeState


@dataclass
class NodeSet:
    name: str  # domain value, or "cluster" for all nodes
    nodes: list[NodeState]
    # Extra node scores inside the set (a broader domain than the job's preferred level).
    scores: dict[str, float] = field(default_factory=dict)


def _free_gpus(ns: NodeState) -> float:
    free = 0.0
    for d in ns.devices:
        if d.is_free:
            free += 1
        elif d.is_group:
            free += max(0.0, d.memory - d.active) / d.memory
    return free


def _ratio(session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> float:
    """max_r need_r / free_r over the domain (1000 for a needed resource it lacks)."""
    need, free = _need_and_free(session, nodes, tasks)
    ratio = 0.0
    for r, n in need.items():
        if n <= 0:
            continue
        ratio = max(ratio, n / free[r] if free[r] > 0 else 1000.0)
    return ratio


def _fill_ratio(session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> float | None:
    """max_r need_r / free_r over the domain, None when it cannot hold the tasks."""
    ratio = _ratio(session, nodes, tasks)
    return ratio if ratio <= 1 + 1e-9 else None


# KAI's topology score tier (scores.Topology): above GPU sharing, fits-now and binpack parts.
TOPOLOGY_TIER = 100_000.0


def preferred_scores(
    session: Session, job: Job, tasks: Sequence[Task], node_set: NodeSet
) -> dict[str, float]:
    """Node scores inside a node set broader than the job's preferred level (KAI's topology
    node scoring): the set's preferred-level domains ordered fullest first (need/free ratio
    descending, then name), the i-th of n scoring floor(10 (i+1) / n) x 100,000 - the emptiest
    domain highest, so the pods gather where most room is left."""
    topo = job.topology
    if topo is None or not topo.preferred:
        return {}
    if topo.levels and topo.preferred in topo.levels:
        keys = topo.levels[: topo.levels.index(topo.preferred) + 1]
        domains = _level_domains(node_set.nodes, keys)
    else:
        domains = _domains(node_set.nodes, topo.preferred)
    if len(domains) < 2:
        return {}
    ordered = sorted(domains.items(), key=lambda kv: (-_ratio(session, kv[1], tasks), kv[0]))
    n = len(ordered)
    out: dict[str, float] = {}
    for i, (_name, members) in enumerate(ordered):
        score = math.floor(10 * (i + 1) / n) * TOPOLOGY_TIER
        for ns in members:
            out[ns.name] = score
    return out


def _shape(t: Task) -> tuple[float, float, float, float]:
    return (t.gpu, t.gpu_memory_mib, t.cpu_millis, t.memory_mib)


def _pods_fit(session: Session, ns: NodeState, task: Task) -> int:
    """How many copies of ``task`` the node's idle and releasing room holds (none on a node its
    job's taints, selector or node affinity rule out)."""
    if not ns.schedulable:
        return 0
    job = session.task_job.get(task.key)
    if job is not None and rules.static_reason(ns.node, job) is not None:
        return 0
    counts = [int(ns.pods_idle + ns.pods_rel)]
    if task.cpu_millis > 0:
        counts.append(int((ns.cpu_idle + ns.cpu_rel + 1e-4) // task.cpu_millis))
    if task.memory_mib > 0:
        counts.append(int((ns.mem_idle + ns.mem_rel + 1e-4) // task.memory_mib))
    if task.whole_gpus:
        counts.append(ns.free_whole_gpus() // task.whole_gpus)
    elif task.is_fractional:
        need = session.device_need(task, ns.node.gpu_memory_mib)
        per_device = 0
        for d in ns.devices:
            if need > 0 and (d.is_free or d.is_group):
                per_device += int((d.memory - d.active + EPS) // need)
        counts.append(per_device)
    return max(0, min(counts))


def allocatable_pods(session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> int | None:
    """Pods of the job a domain can hold when all its pods have one shape (KAI's
    ``AllocatablePods``); None for pods of different shapes (judged by free resources instead)."""
    if not tasks or any(_shape(t) != _shape(tasks[0]) for t in tasks):
        return None
    return sum(_pods_fit(session, ns, tasks[0]) for ns in nodes)


def _need_and_free(
    session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]
) -> tuple[dict[str, float], dict[str, float]]:
    """What ``tasks`` need in all, and what the domain's schedulable nodes have free (or releasing)."""
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
    return need, free


def _short_of(session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> list[str]:
    need, free = _need_and_free(session, nodes, tasks)
    names = {"gpu": "GPUs", "cpu": "CPU cores", "memory": "memory"}
    return [names[r] for r in ("gpu", "cpu", "memory") if need[r] > free[r] + 1e-9]


def domain_fits(session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> bool:
    pods = allocatable_pods(session, nodes, tasks)
    if pods is not None:
        return pods >= len(tasks)
    return _fill_ratio(session, nodes, tasks) is not None


def required_domain_errors(
    session: Session, job: Job, tasks: Sequence[Task], nodes: Sequence[NodeState]
) -> list[str]:
    """Why each domain of the job's required level cannot hold the job (KAI's topology fit
    errors, one per domain; equal messages are counted as KAI's histogram does)."""
    topo = job.topology
    if topo is None or not topo.required:
        return []
    messages: list[str] = []
    for name, members in sorted(_required_domains(session, job, nodes, topo.required).items()):
        pods = allocatable_pods(session, members, tasks)
        if pods is not None:
            if pods < len(tasks):
                messages.append(reasons.domain_pods(name, pods, len(tasks)))
        else:
            messages.extend(reasons.domain_short(r) for r in _short_of(session, members, tasks))
    counts: dict[str, int] = {}
    for m in messages:
        counts[m] = counts.get(m, 0) + 1
    return [m if n == 1 else f"{n} {m}" for m, n in counts.items()]


def _required_domains(
    session: Session, job: Job, nodes: Sequence[NodeState], key: str
) -> dict[str, list[NodeState]]:
    topo = job.topology
    if topo is not None and key in topo.levels:
        required = _level_domains(nodes, topo.levels[: topo.levels.index(key) + 1])
    else:
        required = _domains(nodes, key)
    placements = session.placements
    running = {
        p.node
        for t in job.tasks
        if (p := placements.get(t.key) or placements.on_demand(t.key))
        and p.node
        and p.status.value != "Releasing"
    }
    if running:  # a job that already runs stays in the domain of its pods
        required = {k: v for k, v in required.items() if running & {ns.name for ns in v}}
    return required


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
        if not domain_fits(session, nodes, tasks):
            continue
        ratio = _fill_ratio(session, nodes, tasks)
        scored.append((-(ratio if ratio is not None else 1.0), name, nodes))
    scored.sort(key=lambda x: (x[0], x[1]))  # fullest domain first (binpack of domains)
    return [NodeSet(name, nodes) for _, name, nodes in scored]


def _level_domains(nodes: Sequence[NodeState], keys: Sequence[str]) -> dict[str, list[NodeState]]:
    """Domains of the level ``keys[-1]`` of a topology tree: nodes grouped by their values of
    every level down to it (a rack name may repeat in two zones); named by the last value.
    Nodes without one of the labels belong to no domain of that level."""
    groups: dict[tuple[str, ...], list[NodeState]] = {}
    for ns in nodes:
        values = tuple(ns.node.labels.get(k) for k in keys)
        if all(v is not None for v in values):
            groups.setdefault(values, []).append(ns)  # type: ignore[arg-type]
    out: dict[str, list[NodeState]] = {}
    for values, members in sorted(groups.items()):
        name = values[-1]
        if name in out:  # the same last value under two parents: qualify it
            name = "/".join(values)
        out[name] = members
    return out


def _tree_sets(
    session: Session, job: Job, tasks: Sequence[Task], nodes: Sequence[NodeState]
) -> list[NodeSet]:
    """Candidate node sets on a topology tree (kai-semantics §7): every fitting domain of each
    level from the preferred one up to the required one (or the whole cluster), narrowest level
    first, fullest domain first within a level; all inside a fitting domain of the required
    level (the one holding the job's running pods, if any)."""
    topo = job.topology
    assert topo is not None
    levels = list(topo.levels)
    req = levels.index(topo.required) if topo.required else -1
    pref = levels.index(topo.preferred) if topo.preferred else req
    allowed = list(nodes)
    if topo.required:
        outer = _fitting(session, _required_domains(session, job, nodes, topo.required), tasks)
        keep = {ns.name for s in outer for ns in s.nodes}
        allowed = [ns for ns in nodes if ns.name in keep]
        if not allowed:
            return []
    sets: list[NodeSet] = []
    for level in range(pref, req - 1, -1):
        if level < 0:
            sets.append(NodeSet("cluster", list(nodes)))
        else:
            sets.extend(_fitting(session, _level_domains(allowed, levels[: level + 1]), tasks))
    return sets


def node_sets(session: Session, job: Job, tasks: Sequence[Task], nodes: Sequence[NodeState]) -> list[NodeSet]:
    """Node sets to try in order, narrowest level first; empty when a required level cannot fit."""
    topo = job.topology
    if topo is None or (topo.required is None and topo.preferred is None):
        return [NodeSet("cluster", list(nodes))]
    if topo.levels and all(k in topo.levels for k in (topo.required, topo.preferred) if k):
        return _with_scores(session, job, tasks, _tree_sets(session, job, tasks, nodes))
    if topo.required:
        outer = _fitting(session, _required_domains(session, job, nodes, topo.required), tasks)
    else:
        outer = [NodeSet("cluster", list(nodes))]
    sets: list[NodeSet] = []
    if topo.preferred:
        for top in outer:
            sets.extend(_fitting(session, _domains(top.nodes, topo.preferred), tasks))
    sets.extend(outer)
    return _with_scores(session, job, tasks, sets)


def _with_scores(session: Session, job: Job, tasks: Sequence[Task], sets: list[NodeSet]) -> list[NodeSet]:
    for node_set in sets:
        node_set.scores = preferred_scores(session, job, tasks, node_set)
    return sets
