"""Choosing a node for one task (kai-semantics.md §4.5): every fitting node scored (shared GPU
group, fits now, binpack or spread, the job's preferences) and the best one taken, through the
node index where it gives the same answer faster. Under the ``fragmentation`` option the
resource part of the score is ``scheduler.fragmentation``'s instead (its own cache is the fast
path). Whether a task fits a node, and on which
devices, is ``scheduler.fit``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler import fragmentation, rules
from scheduler.fit import Fit, Rules, counters_of, gpu_counters_below_zero, node_fit
from scheduler.model import Job, Task
from scheduler.node_index import index_of
from scheduler.session import Session
from scheduler.state import NodeState


def _free_and_total(session: Session, ns: NodeState, gpu: bool) -> tuple[float, float]:
    if gpu:
        counted = counters_of(session, ns)
        if counted is not None:
            # binpack's NonAllocatedResource: KAI's idle + releasing counters (fit.counters_of)
            return counted.idle + counted.releasing, float(len(ns.devices))
        return float(ns.free_whole_gpus()), float(len(ns.devices))
    return ns.cpu_idle + ns.cpu_rel, float(ns.node.cpu_millis)


def node_score(
    fit: Fit,
    gpu: bool,
    spread: bool,
    sharing: bool,
    cpu_only: bool,
    free: float,
    total: float,
    mn: float,
    mx: float,
    base: float,
) -> float:
    """Score of one fitting node (§4.5): shared GPU group >> fits now >> CPU-only node for a
    CPU task >> binpack 0..9 (or spread 0..1) over the fitting nodes' free amounts [mn, mx].
    ``sharing`` is ``Config.gpu_sharing_order``: the GPU strategy decides the shared-group bonus,
    not the task's own strategy (a CPU task under CPU spread still gets it under GPU binpack)."""
    s = base
    if fit.shares_group and sharing:
        s += 10_000
    if fit.avail:  # KAI's nodeavailability (IsTaskAllocatable): see Fit.avail
        s += 1_000
    if not gpu and cpu_only:
        s += 10
    if total > 0:
        if spread:
            s += free / total
        elif mx <= 0:
            pass
        elif mn == mx:
            s += 9
        else:
            s += 9 * (1 - (free - mn) / (mx - mn))
    return s


def score_nodes(
    session: Session,
    task: Task,
    fits: Sequence[tuple[NodeState, Fit]],
    selector: Rules | None = None,
    extra: Mapping[str, float] | None = None,
) -> list[tuple[NodeState, Fit]]:
    """Sort fitting nodes best first: score descending, then node name (§4.5); a job's
    preferences (preferred node affinity, affinity to its own pods, PreferNoSchedule taints)
    weigh above every resource-based part of the score.

    This is the reference rule; :func:`best_fit` finds its first element without scanning every
    node where it can (tests/engine/test_node_search.py checks they agree)."""
    gpu = task.needs_gpu
    if fragmentation.applies(session, task):
        return _score_fragmentation(session, task, fits, selector, extra)
    spread = session.config.strategy(gpu) == "spread"
    sharing = session.config.gpu_sharing_order
    frees = {ns.name: _free_and_total(session, ns, gpu) for ns, _ in fits}
    having = [f for f, total in frees.values() if total > 0]
    mn, mx = (min(having), max(having)) if having else (0.0, 0.0)
    job = selector if isinstance(selector, Job) else None
    held: set[str] | None = None
    if job is not None and job.affinity_key and job.affinity_weight:
        held = rules.job_domains(session, job, job.affinity_key)
    soft = job is not None and (job.has_preferences or session.soft_taints)

    def score(item: tuple[NodeState, Fit]) -> float:
        ns, fit = item
        base = rules.preference(session, ns.node, job, held) if soft and job is not None else 0.0
        if extra:
            base += extra.get(ns.name, 0.0)
        free, total = frees[ns.name]
        return node_score(fit, gpu, spread, sharing, not ns.devices, free, total, mn, mx, base)

    return sorted(fits, key=lambda item: (-score(item), item[0].name))


def _score_fragmentation(
    session: Session,
    task: Task,
    fits: Sequence[tuple[NodeState, Fit]],
    selector: Rules | None,
    extra: Mapping[str, float] | None,
) -> list[tuple[NodeState, Fit]]:
    """``score_nodes`` under the fragmentation strategy: the job's preferences and ``extra`` as
    there, then ``fragmentation.resource_score`` in place of the GPU-sharing and binpack parts
    (with the device it chooses for a fraction)."""
    job = selector if isinstance(selector, Job) else None
    held: set[str] | None = None
    if job is not None and job.affinity_key and job.affinity_weight:
        held = rules.job_domains(session, job, job.affinity_key)
    soft = job is not None and (job.has_preferences or session.soft_taints)

    scored = []
    for ns, fit in fits:
        base = rules.preference(session, ns.node, job, held) if soft and job is not None else 0.0
        if extra:
            base += extra.get(ns.name, 0.0)
        score, chosen = fragmentation.resource_score(session, ns, task, fit)
        scored.append((-(base + score), ns.name, ns, chosen))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [(ns, fit) for _, _, ns, fit in scored]


def scan_fits(
    session: Session, task: Task, selector: Rules, nodes: Sequence[NodeState]
) -> tuple[list[tuple[NodeState, Fit]], dict[str, int]]:
    """Every node's fit (the reference scan): the fitting nodes and counts of the other reasons."""
    fits = []
    counts: dict[str, int] = {}
    for ns in nodes:
        fit = node_fit(session, ns, task, selector)
        if fit.ok:
            fits.append((ns, fit))
        elif fit.reason:
            counts[fit.reason] = counts.get(fit.reason, 0) + 1
    return fits, counts


def best_fit_reference(
    session: Session,
    task: Task,
    selector: Rules,
    nodes: Sequence[NodeState],
    extra: Mapping[str, float] | None = None,
) -> tuple[NodeState, Fit] | None:
    """The best fitting node by the plain rule: check every node, sort, take the first."""
    fits, _ = scan_fits(session, task, selector, nodes)
    return score_nodes(session, task, fits, selector, extra)[0] if fits else None


def best_fit(
    session: Session,
    task: Task,
    selector: Rules,
    nodes: Sequence[NodeState],
    extra: Mapping[str, float] | None = None,
) -> tuple[NodeState, Fit] | None:
    """Same answer as :func:`best_fit_reference`, fast for whole-GPU tasks under binpack on the
    whole pool, and for a task placed by fragmentation on the whole pool (its per-shape score
    cache); other cases (fractional, CPU-only, spread, a topology subset, a job whose node
    scores depend on preferences) scan every node. Required rules (taints, affinity,
    anti-affinity) are filters, which the index checks node by node like the reference."""
    ledger = session.gpu_ledger
    drifted = frozenset[int]()
    if ledger is not None and task.needs_gpu:
        # While consolidation keeps KAI's counters, a GPU task's fits and scores read them on
        # the nodes where they may differ from the devices (fit.counters_of), which the node
        # index does not keep: it answers for the other nodes, merged there (_best_fit_drifted).
        names = ledger.drifted_nodes(task)
        if names:
            rank = index_of(session).rank
            drifted = frozenset(rank[n] for n in names if n in rank)
    elif ledger is not None and _counters_below_zero(session, ledger.drifted_nodes()):
        # a task without GPUs is refused, or scored lower, where KAI's GPU counters went below
        # zero (fit.gpu_counters_below_zero), which the CPU index does not see: scan
        return best_fit_reference(session, task, selector, nodes, extra)
    scored = bool(extra) or (isinstance(selector, Job) and (selector.has_preferences or session.soft_taints))
    if not scored and len(nodes) == len(session.nodes):
        if drifted:
            if fragmentation.applies(session, task):
                return best_fit_reference(session, task, selector, nodes, extra)
            return _best_fit_drifted(session, task, selector, nodes, drifted)
        if fragmentation.applies(session, task):
            # Its cache is per task shape and node selector: a job with other rules scans.
            if not (isinstance(selector, Job) and selector.has_rules):
                return fragmentation.best(session, task, selector)
            return best_fit_reference(session, task, selector, nodes, extra)
        binpack_gpu = session.config.strategy(True) != "spread"
        if task.whole_gpus and binpack_gpu:
            return index_of(session).best_whole(task, selector)
        found: tuple[NodeState, Fit] | None | bool = False
        if task.is_fractional and binpack_gpu:
            found = index_of(session).best_fraction(task, selector)
        elif not task.needs_gpu and session.config.strategy(False) != "spread":
            found = index_of(session).best_cpu(task, selector)
        if found is not False:
            return found  # type: ignore[return-value]
    return best_fit_reference(session, task, selector, nodes, extra)


def _counters_below_zero(session: Session, names: Iterable[str]) -> bool:
    """Whether any of these drifted nodes has KAI's idle, or idle + releasing, GPU counters
    below zero (``fit.gpu_counters_below_zero``)."""
    nodes = session.nodes
    for name in names:
        below = gpu_counters_below_zero(session, nodes[name])
        if below is not None and (below[0] or below[1]):
            return True
    return False


def _best_fit_drifted(
    session: Session, task: Task, selector: Rules, nodes: Sequence[NodeState], drifted: frozenset[int]
) -> tuple[NodeState, Fit] | None:
    """``best_fit_reference`` of a GPU task while KAI's counters have drifted on some nodes
    (``drifted``: their index ranks): the node index gives each score tier's best node among
    the others and their binpack range, the drifted nodes are fitted and scored from the
    counters, and the candidates are scored together over the joint binpack range. Within a
    tier the binpack part only falls as free GPUs grow, so no other undrifted node can win."""
    index = index_of(session)
    binpack_gpu = session.config.strategy(True) != "spread"
    found: tuple[list[tuple[NodeState, Fit]], int | None, int | None] | bool = False
    if task.whole_gpus and binpack_gpu:
        found = index.whole_tiers(task, selector, drifted)
    elif task.is_fractional and binpack_gpu:
        found = index.fraction_tiers(task, selector, drifted)
    if found is False:
        return best_fit_reference(session, task, selector, nodes)
    assert not isinstance(found, bool)
    hits, mn, mx = found
    names = index.names
    fits = [(session.nodes[names[r]], None) for r in sorted(drifted)]
    candidates = list(hits)
    frees: list[float] = [float(k) for k in (mn, mx) if k is not None]
    for ns, _ in fits:
        fit = node_fit(session, ns, task, selector)
        if fit.ok:
            candidates.append((ns, fit))
            free, total = _free_and_total(session, ns, True)
            if total > 0:
                frees.append(free)
    if not candidates:
        return None
    low, high = (min(frees), max(frees)) if frees else (0.0, 0.0)
    sharing = session.config.gpu_sharing_order

    def key(item: tuple[NodeState, Fit]) -> tuple[float, str]:
        ns, fit = item
        free, total = _free_and_total(session, ns, True)
        return -node_score(fit, True, False, sharing, not ns.devices, free, total, low, high, 0.0), ns.name

    return min(candidates, key=key)
