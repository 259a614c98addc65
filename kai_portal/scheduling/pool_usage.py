"""Per-pool GPU samples, one row per node pool per cycle, from the engine's own numbers.

Cheap by design: the engine already reports each queue's allocation per pool
(``CycleResult.pool_queues``); the pool's total is the sum over its top-level
queues. Two queries per cycle: the pools' ids and one ``bulk_create``.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from kai_portal.nodes.models import NodePool, PoolUsageSample
from kai_portal.scheduling.snapshot_index import CycleInput
from scheduler import CycleResult


def _gpus(value: float) -> Decimal:
    return Decimal(str(round(value, 2)))


def record_pool_usage(inp: CycleInput, result: CycleResult, now: datetime) -> int:
    roots = {q.name for q in inp.snapshot.queues if q.parent is None}
    totals: dict[str, float] = {}
    for node in inp.snapshot.nodes:
        if not node.unschedulable:
            totals[node.pool] = totals.get(node.pool, 0.0) + node.gpus
    names = set(totals) | set(result.pool_queues)
    if inp.pool is not None:
        names &= {inp.pool}  # a pool's cycle samples its own pool only (the others are empty here)
    pool_ids = dict(NodePool.objects.filter(name__in=names).values_list("name", "pk"))
    samples = []
    for name, pool_id in pool_ids.items():
        outcomes = result.pool_queues.get(name, {})
        allocated = sum(o.allocated.get("gpu", 0.0) for q, o in outcomes.items() if q in roots)
        requested = sum(o.requested.get("gpu", 0.0) for q, o in outcomes.items() if q in roots)
        samples.append(
            PoolUsageSample(
                pool_id=pool_id,
                sampled_at=now,
                gpus_total=_gpus(totals.get(name, 0.0)),
                gpus_allocated=_gpus(allocated),
                gpus_requested=_gpus(requested),
            )
        )
    PoolUsageSample.objects.bulk_create(samples)
    return len(samples)
