"""Fair-share division over the queue tree (kai-semantics.md §2).

Each resource is divided on its own, level by level: the capacity among the
top-level queues, then each queue's fair share among its children.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.model import RESOURCES, Queue, clean

# Surplus is handed out in whole units of the resource as KAI counts it:
# GPU devices, CPU millicores, memory bytes (our memory is MiB).
UNIT: dict[str, float] = {"gpu": 1.0, "cpu": 1.0, "memory": 1.0 / 1048576}
EPS = 1e-9


@dataclass
class DivisionInput:
    """What one sibling brings to a division of one resource."""

    name: str
    quota: float
    limit: float
    weight: float
    priority: int
    requested: float
    created_index: int = 0
    usage: float = 0.0

    @property
    def requestable(self) -> float:
        return self.requested if self.limit < 0 else min(self.limit, self.requested)


@dataclass
class _Share:
    item: DivisionInput
    fs: float = 0.0

    @property
    def need(self) -> float:
        return clean(self.item.requestable - self.fs)


def _floor_units(x: float, unit: float) -> float:
    return math.floor(x / unit + EPS) * unit


def divide(
    total: float, siblings: Sequence[DivisionInput], unit: float = 1.0, k: float = 0.0
) -> dict[str, float]:
    """Split ``total`` among siblings: deserved quota, surplus by priority/weight, crumbs.

    ``k`` is the time-based fair-share factor (0 = plain weights).
    """
    shares = {s.name: _Share(s) for s in siblings}
    remaining = total
    # Phase 1: deserved quota, capped by what the queue can use; unused quota is not reserved.
    for sh in shares.values():
        dq = total if sh.item.quota < 0 else sh.item.quota
        amount = max(0.0, min(dq, sh.item.requestable))
        sh.fs = clean(sh.fs + amount)
        remaining = clean(remaining - amount)
    if remaining <= EPS:
        return {n: sh.fs for n, sh in shares.items()}

    # Phase 2: surplus, highest queue priority bucket first.
    priorities = sorted({s.priority for s in siblings}, reverse=True)
    crumbs: dict[int, dict[str, float]] = {}
    for prio in priorities:
        bucket = [sh for sh in shares.values() if sh.item.priority == prio]
        bucket_crumbs = crumbs.setdefault(prio, {})
        while remaining > EPS:
            amount = remaining
            open_ = [sh for sh in bucket if sh.need > EPS]
            total_w = sum(sh.item.weight for sh in open_)
            if total_w <= 0:
                break
            s = {
                sh.item.name: max(0.0, sh.item.weight / total_w * (1 + k) - k * sh.item.usage) for sh in open_
            }
            sum_s = sum(s.values())
            if sum_s <= 0:
                break
            freed = False
            for sh in open_:
                if sh.item.weight <= 0:
                    continue
                share = amount * s[sh.item.name] / sum_s
                need = sh.need
                if need <= share + EPS:
                    given = need
                    bucket_crumbs.pop(sh.item.name, None)
                    freed = freed or need < share - EPS
                else:
                    given = _floor_units(share, unit)
                    frac = share - given
                    if frac > EPS:
                        bucket_crumbs[sh.item.name] = frac
                sh.fs = clean(sh.fs + given)
                remaining = clean(remaining - given)
            if not freed:
                break

    # Phase 3: crumbs left by the floor() rounding, at most one unit each, one pass.
    for prio in priorities:
        if remaining <= EPS:
            break
        order = sorted(
            crumbs.get(prio, {}).items(),
            key=lambda kv: (-kv[1], shares[kv[0]].item.created_index, kv[0]),
        )
        for name, _frac in order:
            if remaining <= EPS:
                break
            given = min(unit, remaining)
            shares[name].fs = clean(shares[name].fs + given)
            remaining = clean(remaining - given)
    return {n: sh.fs for n, sh in shares.items()}


@dataclass
class TreeShares:
    """Fair share per queue and resource, plus the inputs users see."""

    fair_share: dict[str, dict[str, float]] = field(default_factory=dict)
    requested: dict[str, dict[str, float]] = field(default_factory=dict)


def children_map(queues: Sequence[Queue]) -> dict[str | None, list[Queue]]:
    """Parent name -> children (None = top level), in creation order."""
    out: dict[str | None, list[Queue]] = {}
    for q in sorted(queues, key=lambda q: (q.created_index, q.name)):
        out.setdefault(q.parent, []).append(q)
    return out


def subtree_sums(
    queues: Sequence[Queue], leaf_values: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """Sum leaf values up the tree: a parent's value is the plain sum of its children's."""
    kids = children_map(queues)
    out: dict[str, dict[str, float]] = {}

    def visit(q: Queue) -> dict[str, float]:
        own = leaf_values.get(q.name, {})
        acc = {r: float(own.get(r, 0.0)) for r in RESOURCES}
        for c in kids.get(q.name, []):
            sub = visit(c)
            for r in RESOURCES:
                acc[r] = clean(acc[r] + sub[r])
        out[q.name] = acc
        return acc

    for top in kids.get(None, []):
        visit(top)
    return out


def compute_fair_shares(
    queues: Sequence[Queue],
    capacity: Mapping[str, float],
    requested: Mapping[str, Mapping[str, float]],
    usage: Mapping[str, Mapping[str, float]] | None = None,
    k: float = 0.0,
) -> TreeShares:
    """Fair share of every queue for every resource.

    ``requested`` is per leaf queue; it is summed up the tree here. ``usage`` is the
    normalised historical usage U' per queue (time-based fair share), ``k`` its factor.
    """
    kids = children_map(queues)
    req = subtree_sums(queues, requested)
    usage = usage or {}
    result = TreeShares(requested=req)
    for q in queues:
        result.fair_share[q.name] = {r: 0.0 for r in RESOURCES}

    for r in RESOURCES:

        def level(parent: str | None, total: float, r: str = r) -> None:
            siblings = kids.get(parent, [])
            if not siblings:
                return
            inputs = [
                DivisionInput(
                    name=q.name,
                    quota=q.res(r).quota,
                    limit=q.res(r).limit,
                    weight=q.res(r).over_quota_weight,
                    priority=q.priority,
                    requested=req[q.name][r],
                    created_index=q.created_index,
                    usage=usage.get(q.name, {}).get(r, 0.0),
                )
                for q in siblings
            ]
            shares = divide(total, inputs, UNIT[r], max(0.0, k))
            for q in siblings:
                result.fair_share[q.name][r] = shares[q.name]
                level(q.name, shares[q.name])

        level(None, float(capacity.get(r, 0.0)))
    return result
