"""Node fit, node scoring and GPU device choice for one task (kai-semantics.md §4.5, §4.6, §6)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler import reasons
from scheduler.model import POOL_LABEL, Task
from scheduler.session import EPS, NodeState, Session

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


def _selector_matches(ns: NodeState, selector: Mapping[str, str]) -> bool:
    labels = ns.node.labels
    # The pool key is enforced by sharding already (a session holds one pool's nodes).
    return all(labels.get(k) == v for k, v in selector.items() if k != POOL_LABEL)


def _fraction_devices(session: Session, ns: NodeState, task: Task) -> tuple[int | None, bool, bool]:
    """Pick the device for a fractional task: (index, fits now, is an existing group)."""
    need = session.device_need(task, ns.node.gpu_memory_mib)
    spread = session.config.placement == "spread"
    best: tuple[float, int] | None = None
    best_group = False
    for d in ns.devices:
        if need > d.memory + EPS:
            continue
        if d.is_group:
            if d.memory - d.active < need - EPS:
                continue
            used = d.active / d.memory
            score = 1 - used if spread else used
            group = True
        elif d.is_free:
            score = 1.0 if spread else 0.0
            group = False
        else:
            continue
        if best is None or score > best[0] + EPS:
            best = (score, d.index)
            best_group = group
    if best is None:
        return None, False, False
    d = ns.devices[best[1]]
    now = d.memory - d.active - d.releasing >= need - EPS
    return best[1], now, best_group


def node_fit(session: Session, ns: NodeState, task: Task, selector: Mapping[str, str]) -> Fit:
    """Whether the task fits the node (into idle + releasing), and how."""
    if ns.node.unschedulable:
        return Fit(False, reason=reasons.NODE_UNSCHEDULABLE)
    if selector and not _selector_matches(ns, selector):
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
        index, dev_now, group = _fraction_devices(session, ns, task)
        if index is None:
            what = "GPU memory" if task.gpu == 0 else "GPUs"
            return Fit(False, reason=reasons.not_enough(what))
        devices = (index,)
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


def score_nodes(
    session: Session,
    task: Task,
    fits: Sequence[tuple[NodeState, Fit]],
    extra: Mapping[str, float] | None = None,
) -> list[tuple[NodeState, Fit]]:
    """Sort fitting nodes best first: score descending, then node name (§4.5)."""
    gpu = task.needs_gpu
    spread = session.config.placement == "spread"
    frees = {ns.name: _free_and_total(ns, gpu) for ns, _ in fits}
    having = [f for f, total in frees.values() if total > 0]
    mn, mx = (min(having), max(having)) if having else (0.0, 0.0)

    def score(item: tuple[NodeState, Fit]) -> float:
        ns, fit = item
        s = extra.get(ns.name, 0.0) if extra else 0.0
        if fit.shares_group and not spread:
            s += 10_000
        if fit.now:
            s += 1_000
        if not gpu and not ns.devices:
            s += 10
        free, total = frees[ns.name]
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

    return sorted(fits, key=lambda item: (-score(item), item[0].name))
