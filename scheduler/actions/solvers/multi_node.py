"""KAI's second scenario generator (``plugins/multinodegang/generator.go``): the victim stream is
accumulated one contribution at a time, as the node-local generator does
(``PodAccumulatedScenarioBuilder``), but each accumulated scenario that passes the idle-GPU filter
is split by node (``sub_scenario_emitter.go``): the nodes holding an accumulated victim are sorted
by the GPUs they would have free, fewest first, and the scenarios take every victim contribution
with a task on the first k of them, k growing from the smallest that covers the step's GPUs."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from scheduler.actions.solvers.allocate_order import PendingHeads
from scheduler.actions.solvers.budget import out_of_time, spend
from scheduler.actions.solvers.free_capacity import FreeTracker
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.actions.solvers.simulation import SolveLog, simulate
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import EPS, NodeState
from scheduler.statement import Statement

# KAI compares the nodes' GPU sums as floats; ours come from MiB ratios, rounded so that equal
# capacities tie (and fall to first-seen order) as KAI's do.
_DIGITS = 6


def multi_node_probe(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    recorded: list[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None,
    nodes: list[NodeState],
    tried: set[tuple[int, frozenset[str], frozenset[str]]],
    log: SolveLog | None = None,
) -> Outcome | None:
    """One probe of KAI's multi-node generator for ``tasks`` (a part of the step) with the victims
    earlier probes of this generator recorded.

    The first scenario is the recorded victims alone (``GetValidScenario`` of a scenario with no
    potential victim). Then the stream, less the recorded tasks, is accumulated one contribution
    at a time; each accumulated scenario that passes the idle-GPU filter gives the sub-scenarios
    of ``sub_scenarios``, each with the recorded victims added. A victim set already simulated
    and failed for this step is not simulated again (``tried``, shared with the node-local
    generator as KAI's failed-scenario fingerprints are)."""
    tracker = FreeTracker(session, nodes, tasks)
    spend(session, len(nodes))
    rec_keys = {t.key for c in recorded for t in c.tasks}
    for c in recorded:
        for t in c.tasks:
            tracker.add(t)
    recorded_set = frozenset(rec_keys)
    recorded_freed: dict[str, float] = {}
    for c in recorded:
        for t in c.tasks:
            node = session.placements[t.key].node
            if node is not None:
                recorded_freed[node] = recorded_freed.get(node, 0.0) + _accepted_gpus(session, t)

    def attempt(picked: list[Contribution]) -> Outcome | None:
        key = (len(tasks), recorded_set, frozenset(t.key for c in picked for t in c.tasks))
        if key in tried:
            return None
        # node_order: every victim re-placed through the node order (KAI's AllocateJob(isPipelineOnly)),
        # which is all that moves_only changes in ``simulate``: consolidation probes the same way
        out = simulate(
            session, stmt, job, tasks, recorded + picked, validate, heads, False, log, node_order=True
        )
        if out is None:
            tried.add(key)
        return out

    if recorded and tracker.ok():
        out = attempt([])
        if out is not None:
            return out
    rest: list[Contribution] = []
    for c in stream:
        ts = [t for t in c.tasks if t.key not in rec_keys]
        if ts:
            rest.append(c if len(ts) == len(c.tasks) else Contribution(c.job, ts))
    for k, c in enumerate(rest, start=1):
        for t in c.tasks:
            tracker.add(t)
        if not tracker.ok():
            continue
        for picked in sub_scenarios(session, rest[:k], recorded_freed, nodes, tasks):
            if out_of_time(session):
                return None
            out = attempt(picked)
            if out is not None:
                return out
    return None


def sub_scenarios(
    session: Session,
    batches: list[Contribution],
    recorded_freed: dict[str, float],
    feasible: list[NodeState],
    tasks: list[Task],
) -> Iterator[list[Contribution]]:
    """KAI's ``subScenarioEmitter`` over one accumulated scenario (``batches``: its potential
    victim contributions in stream order, each one accumulator step).

    A node's capacity: its idle and releasing GPUs, the recorded victims' GPUs on it and the GPUs
    of the accumulated victims on it (``nodeCapacities``). Nodes below the step's smallest task's
    GPUs are dropped; the rest are sorted by capacity, ties by where the node's first victim task
    stands in the scenario (``sortViableCandidates``). k starts at the smallest prefix of these
    nodes whose capacity, with the free GPUs of the feasible nodes holding no victim
    (``baselineCapacity``), covers the step's GPUs (``smallestKCovering``; none: no scenario),
    and grows by 1, 2, 4, ... up to every candidate (``advanceNextK``). Picking a node takes every
    contribution with a task on it, whole (gangs stay whole)."""
    demand = sum(_requested_gpus(t) for t in tasks)
    min_task = min((_requested_gpus(t) for t in tasks), default=0.0)
    node_batches: dict[str, list[int]] = {}
    first_seen: dict[str, int] = {}
    cap: dict[str, float] = {}
    idx = 0
    for bi, c in enumerate(batches):
        for t in c.tasks:
            node = session.placements[t.key].node
            idx += 1
            if node is None:
                continue
            first_seen.setdefault(node, idx)
            on = node_batches.setdefault(node, [])
            if not on or on[-1] != bi:
                on.append(bi)
            cap[node] = cap.get(node, 0.0) + _accepted_gpus(session, t)
    for node in node_batches:
        cap[node] += recorded_freed.get(node, 0.0) + _idle_or_releasing_gpus(session, session.nodes[node])
        cap[node] = round(cap[node], _DIGITS)
    candidates = sorted(
        (n for n in node_batches if not (min_task > 0 and cap[n] + EPS < min_task)),
        key=lambda n: (cap[n], first_seen[n]),
    )
    baseline = sum(
        _idle_or_releasing_gpus(session, ns) + recorded_freed.get(ns.name, 0.0)
        for ns in feasible
        if ns.name not in node_batches
    )
    remaining = demand - baseline
    k = 0
    if remaining > EPS:
        k = len(candidates) + 1
        total = 0.0
        for i, n in enumerate(candidates):
            total += cap[n]
            if total + EPS >= remaining:
                k = i + 1
                break
    spend(session, len(batches) + len(candidates))
    dk = 1
    while k <= len(candidates):
        picked = sorted({bi for n in candidates[:k] for bi in node_batches[n]})
        yield [batches[bi] for bi in picked]
        if k == len(candidates):
            return
        k = min(k + dk, len(candidates))
        dk *= 2


def _requested_gpus(t: Task) -> float:
    """A pending task's GPUs as KAI's ``GpuRequirement.GetGpusQuota`` counts them: whole GPUs, or
    fraction times devices; a GPU-memory request has no portion yet and counts 0."""
    if t.whole_gpus:
        return float(t.whole_gpus)
    if 0 < t.gpu < 1:
        return t.gpu * t.fraction_device_count
    return 0.0


def _accepted_gpus(session: Session, t: Task) -> float:
    """A placed task's GPUs as KAI's ``AcceptedGpuRequirement.GetGpusQuota`` counts them: its
    whole devices, or its share of each device it holds. KAI's node sets a GPU-memory task's
    accepted share when the task is added (``node_info.go: setAcceptedResources`` ->
    ``getResourceGpuPortion``), rounded up to hundredths as every GPU-memory portion on a node
    is (``getGpuMemoryFractionalOnNode``), so 10,240 of 40,000 MiB counts 0.26, not 0.256."""
    if t.whole_gpus:
        return float(t.whole_gpus)
    if 0 < t.gpu < 1:
        return t.gpu * t.fraction_device_count
    p = session.placements[t.key]
    if p.node is None or not p.devices:
        return 0.0
    ns = session.nodes[p.node]
    return sum(
        _memory_portion(p.gpu_memory, ns.devices[i].memory) for i in p.devices if ns.devices[i].memory > 0
    )


def _memory_portion(memory: float, device_memory: float) -> float:
    """KAI's ``getGpuMemoryFractionalOnNode``: a device share rounded up to hundredths."""
    return math.ceil(memory / device_memory * 100) / 100


def _idle_or_releasing_gpus(session: Session, ns: NodeState) -> float:
    """KAI's ``nodeIdleOrReleasingGpus`` (``by_pod_solver.go``): ``GetSumOfIdleGPUs`` plus
    ``GetSumOfReleasingGPUs`` of the node, the idle and releasing whole devices and the free share
    of its shared ones. KAI reads them off its node counters, which discarded probes can leave
    changed (``scheduler/gpu_ledger.py``): while consolidation keeps the ledger, its sum of the
    node is read (a node whose counters drifted below its free devices is a smaller candidate,
    or none); else the free share of the engine's devices."""
    ledger = session.gpu_ledger
    if ledger is not None:
        ng = ledger.get(ns.name)
        if ng is not None:
            return ng.sums()[0]
    return sum(max(0.0, d.memory - d.active) / d.memory for d in ns.devices if d.memory > 0)
