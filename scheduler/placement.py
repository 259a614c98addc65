"""Node fit, node scoring and GPU device choice for one task (kai-semantics.md §4.5, §4.6, §6)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler import reasons, rules
from scheduler.model import Job, Task
from scheduler.session import EPS, NodeState, Session, opens_group

# What constrains where a task may go: its job (every placement rule), or only an equality node
# selector (callers that have no job, e.g. tests of the node search).
Rules = Job | Mapping[str, str]

# CPU (millicores) and memory (MiB) sums are rounded to 6 decimals at every step (``clean``), so
# a node filled exactly to its allocatable can show a few 1e-6 of drift; compare with this slack.
AMOUNT_EPS = 1e-4


@dataclass
class Fit:
    """Outcome of checking one task against one node."""

    ok: bool
    now: bool = False  # fits into idle resources: Allocated, not Pipelined
    devices: tuple[int, ...] = ()
    reason: str | None = None
    shares_group: bool = False  # lands on a device other fractional tasks already use


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
            used = d.active / d.memory
            candidates.append((1 - used if spread else used, d.index, True))
        elif d.is_free:
            candidates.append((1.0 if spread else 0.0, d.index, False))
    count = task.fraction_device_count
    if len(candidates) < count:
        return None, False, False, 0
    # Best score first; among equal scores the lowest index (a stable sort keeps device order).
    chosen = sorted(candidates, key=lambda c: -c[0])[:count]
    indices = tuple(sorted(c[1] for c in chosen))
    now = all(
        ns.devices[i].memory - ns.devices[i].active - ns.devices[i].releasing >= need - EPS for i in indices
    )
    # A free device needs its group's reservation pod slot: a new one (idle room), or back from a
    # group whose tasks are all releasing (releasing room).
    opened = sum(1 for i in indices if ns.devices[i].is_free)
    now = now and ns.pods_idle >= 1 + sum(1 for i in indices if opens_group(ns.devices[i]))
    return indices, now, any(c[2] for c in chosen), opened


def node_fit(session: Session, ns: NodeState, task: Task, selector: Rules) -> Fit:
    """Whether the task fits the node (into idle + releasing), and how."""
    if ns.node.unschedulable:
        return Fit(False, reason=reasons.NODE_UNSCHEDULABLE)
    if isinstance(selector, Job):
        why = rules.static_reason(ns.node, selector) or rules.anti_affinity_reason(session, ns.node, selector)
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
    if whole:
        idle: list[int] = []
        rel: list[int] = []
        for d in ns.devices:
            if d.active <= EPS:
                (idle if d.releasing <= EPS else rel).append(d.index)
        if len(idle) + len(rel) < whole:
            return Fit(False, reason=reasons.not_enough("GPUs"))
        devices = tuple((idle + rel)[:whole])
        now = now and len(idle) >= whole
    elif task.is_fractional:
        if not ns.devices:
            return Fit(False, reason=reasons.not_enough("GPUs"))
        chosen, dev_now, group, opened = _fraction_devices(session, ns, task)
        if chosen is None:
            what = "GPU memory" if task.gpu == 0 else "GPUs"
            return Fit(False, reason=reasons.not_enough(what))
        if opened and ns.pods_idle + ns.pods_rel < 1 + opened:
            return Fit(False, reason=reasons.PODS_EXCEEDED)
        devices = chosen
        now = now and dev_now
    if ns.cpu_idle + ns.cpu_rel < task.cpu_millis - AMOUNT_EPS:
        return Fit(False, reason=reasons.not_enough("CPU cores"))
    if ns.mem_idle + ns.mem_rel < task.memory_mib - AMOUNT_EPS:
        return Fit(False, reason=reasons.not_enough("memory"))
    now = now and ns.cpu_idle >= task.cpu_millis - AMOUNT_EPS and ns.mem_idle >= task.memory_mib - AMOUNT_EPS
    return Fit(True, now=now, devices=devices, shares_group=group)


def _free_and_total(ns: NodeState, gpu: bool) -> tuple[float, float]:
    if gpu:
        return float(ns.free_whole_gpus()), float(len(ns.devices))
    return ns.cpu_idle + ns.cpu_rel, float(ns.node.cpu_millis)


def node_score(
    fit: Fit,
    gpu: bool,
    spread: bool,
    cpu_only: bool,
    free: float,
    total: float,
    mn: float,
    mx: float,
    base: float,
) -> float:
    """Score of one fitting node (§4.5): shared GPU group >> fits now >> CPU-only node for a
    CPU task >> binpack 0..9 (or spread 0..1) over the fitting nodes' free amounts [mn, mx]."""
    s = base
    if fit.shares_group and not spread:
        s += 10_000
    if fit.now:
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
    spread = session.config.strategy(gpu) == "spread"
    frees = {ns.name: _free_and_total(ns, gpu) for ns, _ in fits}
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
        return node_score(fit, gpu, spread, not ns.devices, free, total, mn, mx, base)

    return sorted(fits, key=lambda item: (-score(item), item[0].name))


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


class NodeIndex:
    """Schedulable nodes of a session bucketed by free whole GPUs (devices with no active task),
    each bucket in name order; refreshed lazily from ``session.dirty_nodes``.

    For a whole-GPU task under binpack the node score is a function of (fits now, free whole
    GPUs) given the minimum and maximum free count over the fitting nodes, and it does not
    increase with the free count; so the best node is the first fitting one, in name order, of
    the lowest bucket holding one in the best category. Only a few nodes per bucket are checked
    instead of every node."""

    __slots__ = ("session", "buckets", "where", "rank", "names")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.names: list[str] = []
        self.rank: dict[str, int] = {}
        self.where: dict[str, int] = {}
        self.buckets: dict[int, list[int]] = {}
        for ns in session.nodes.values():  # sorted by name
            if not ns.schedulable:
                continue
            r = len(self.names)
            self.names.append(ns.name)
            self.rank[ns.name] = r
            k = ns.free_whole_gpus()
            self.where[ns.name] = k
            self.buckets.setdefault(k, []).append(r)
        session.dirty_nodes.clear()

    def refresh(self) -> None:
        dirty = self.session.dirty_nodes
        if not dirty:
            return
        nodes = self.session.nodes
        for name in dirty:
            old = self.where.get(name)
            if old is None:
                continue  # unschedulable: never indexed
            k = nodes[name].free_whole_gpus()
            if k == old:
                continue
            r = self.rank[name]
            lst = self.buckets[old]
            del lst[bisect.bisect_left(lst, r)]
            bisect.insort(self.buckets.setdefault(k, []), r)
            self.where[name] = k
        dirty.clear()

    def best_whole(self, task: Task, selector: Rules) -> tuple[NodeState, Fit] | None:
        """First node in (score desc, name asc) order for a whole-GPU task under binpack."""
        self.refresh()
        session = self.session
        nodes = session.nodes
        names = self.names
        ks = sorted(k for k, lst in self.buckets.items() if k >= task.whole_gpus and lst)
        if not ks:
            return None

        def first(k: int, now: bool | None) -> tuple[NodeState, Fit] | None:
            """First node of bucket k, in name order, that fits (and fits now / later)."""
            for r in self.buckets[k]:
                ns = nodes[names[r]]
                fit = node_fit(session, ns, task, selector)
                if fit.ok and (now is None or fit.now == now):
                    return ns, fit
            return None

        # Minimum and maximum free count over all fitting nodes (the binpack range).
        mn = next((k for k in ks if first(k, None) is not None), None)
        if mn is None:
            return None
        mx = next(k for k in reversed(ks) if first(k, None) is not None)
        for now in (True, False):
            best: tuple[NodeState, Fit] | None = None
            best_score = 0.0
            for k in ks:
                if k < mn:
                    continue
                # Later buckets score no higher; only an exactly equal score can still win.
                if best is not None and self._score(now, k, mn, mx) != best_score:
                    break
                found = first(k, now)
                if found is None:
                    continue
                if best is None:
                    best, best_score = found, self._score(now, k, mn, mx)
                elif found[0].name < best[0].name:
                    best = found
            if best is not None:
                return best
        return None

    @staticmethod
    def _score(now: bool, k: int, mn: int, mx: int) -> float:
        return node_score(Fit(True, now=now), True, False, False, float(k), 1.0, float(mn), float(mx), 0.0)


def index_of(session: Session) -> NodeIndex:
    idx = session.node_index
    if not isinstance(idx, NodeIndex):
        idx = NodeIndex(session)
        session.node_index = idx
    return idx


def best_fit(
    session: Session,
    task: Task,
    selector: Rules,
    nodes: Sequence[NodeState],
    extra: Mapping[str, float] | None = None,
) -> tuple[NodeState, Fit] | None:
    """Same answer as :func:`best_fit_reference`, fast for whole-GPU tasks under binpack on the
    whole pool; other cases (fractional, CPU-only, spread, a topology subset, a job whose node
    scores depend on preferences) scan every node. Required rules (taints, affinity,
    anti-affinity) are filters, which the index checks node by node like the reference."""
    scored = bool(extra) or (isinstance(selector, Job) and (selector.has_preferences or session.soft_taints))
    if (
        task.whole_gpus
        and not scored
        and session.config.strategy(True) != "spread"
        and len(nodes) == len(session.nodes)
    ):
        return index_of(session).best_whole(task, selector)
    return best_fit_reference(session, task, selector, nodes, extra)
