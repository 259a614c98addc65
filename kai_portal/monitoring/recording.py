"""What one scheduling cycle adds to the running totals behind ``/metrics``.

``record_cycle`` is called by the cycle itself (``scheduling/cycle.py``): for a
succeeded cycle inside the transaction that persists its decisions, so the
totals and the decisions commit together; for a failed or skipped cycle after
its record is written. Evictions and bind/eviction failures are counted from
the cycle's own ``Decision`` rows, the same rows the portal shows.
"""

from __future__ import annotations

import json

from django.db.models import Count

from kai_portal.history.models import Decision, SchedulingCycle
from kai_portal.monitoring import totals

# Seconds; KAI's own cycle is typically well under a second, ours up to tens of seconds at scale.
CYCLE_DURATION = totals.Histogram(
    "cycle_duration_seconds", (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
)
CYCLES = "cycles"
EVICTIONS = "evicted_pods"
OPERATION_FAILURES = "cluster_operation_failures"
# Decision reasons that persist_result writes when the backend refused an operation.
FAILURE_REASONS = {"FailedBinding": "bind", "FailedEviction": "evict"}
OUTCOMES = tuple(SchedulingCycle.Status.values)
EVICTION_ACTIONS = tuple(a for a in Decision.Action.values if a not in ("", Decision.Action.ALLOCATE))


def record_cycle(cycle: SchedulingCycle) -> None:
    """Add one finished (succeeded, failed or skipped) cycle to the totals."""
    increments: dict[tuple[str, str], float] = {(CYCLES, totals.labels_key({"outcome": cycle.status})): 1.0}
    if cycle.status != SchedulingCycle.Status.SKIPPED and cycle.duration_ms is not None:
        increments.update(CYCLE_DURATION.observe(cycle.duration_ms / 1000))
    if cycle.status == SchedulingCycle.Status.SUCCEEDED:
        rows = (
            Decision.objects.filter(cycle=cycle, reason__in=["Evict", *FAILURE_REASONS])
            .order_by()
            .values_list("kind", "action", "reason")
            .annotate(n=Count("id"))
        )
        for kind, action, reason, n in rows:
            if reason in FAILURE_REASONS:
                key = (OPERATION_FAILURES, totals.labels_key({"operation": FAILURE_REASONS[reason]}))
            elif kind == Decision.Kind.EVICTED:
                key = (EVICTIONS, totals.labels_key({"action": action}))
            else:
                continue
            increments[key] = increments.get(key, 0.0) + n
    if cycle.pool:
        increments = with_pool(increments, cycle.pool)
    totals.add(increments)


def with_pool(increments: dict[tuple[str, str], float], pool: str) -> dict[tuple[str, str], float]:
    """The increments labelled with a pool's name. A pool's cycle adds to totals rows of its own,
    so two pools' cycles never wait on one row's lock in their persist transactions (the
    collector sums the pools for the cluster-wide families)."""
    out = {}
    for (name, key), amount in increments.items():
        labels = {**json.loads(key), POOL_LABEL: pool}
        out[(name, totals.labels_key(labels))] = amount
    return out


POOL_LABEL = "pool"
