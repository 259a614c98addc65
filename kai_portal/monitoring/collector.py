"""The Prometheus collector behind ``/metrics``: everything is read from the database at scrape time.

Why not in-process metrics: the scheduling cycle runs in a Celery worker and
``/metrics`` is served by whichever gunicorn worker takes the request, so the
only place every process sees the same numbers is the database. Per-queue
gauges come from the latest ``QueueStatus`` rows (``queues.status.latest_status``,
what the queue pages and API show), pod counts from the pod table, and counters
and the cycle-duration histogram from ``MetricTotal`` (``recording.py``).

Names: KAI Scheduler's where KAI exports the same thing (``kai_queue_*``,
``kai_e2e_scheduling_latency_milliseconds``; KAI's queue labels
``queue_name`` / ``queue_metadata_name`` / ``queue_display_name`` and units:
cores, bytes, GB for memory fair share). The rest are ``kai_portal_*`` in
Prometheus base units (GPU devices, CPU cores, memory bytes, seconds).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from django.db.models import Count
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kai_portal.core.units import RESOURCES
from kai_portal.history.models import SchedulingCycle
from kai_portal.history.queue_status import latest_status
from kai_portal.monitoring import recording, totals
from kai_portal.monitoring.health import last_succeeded_cycle
from kai_portal.monitoring.pool_health import pool_health
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Pod

BYTES_PER_MIB = 2**20
POD_STATES = ("pending", "bound", "running", "releasing")
KAI_QUEUE_LABELS = ["queue_name", "queue_metadata_name", "queue_display_name"]


def base_units(resource: str, value: Decimal | float) -> float:
    """Portal units (GPUs, CPU millicores, memory MiB) to base units (GPUs, cores, bytes); -1 stays."""
    number = float(value)
    if number == -1:
        return -1.0
    if resource == "cpu":
        return number / 1000
    if resource == "memory":
        return number * BYTES_PER_MIB
    return number


class PortalCollector(Collector):
    """Yields every metric family from a handful of queries; no state between scrapes."""

    def collect(self) -> Iterator[Metric]:
        queues = list(
            Queue.objects.order_by("name").values(
                "id", "name", "display_name", *(f"{r}_{k}" for r in RESOURCES for k in ("quota", "limit"))
            )
        )
        yield from self._queue_metrics(queues)
        yield from self._pod_metrics(queues)
        yield from self._cycle_metrics()

    def _queue_metrics(self, queues: list[dict]) -> Iterator[Metric]:
        status = latest_status([q["id"] for q in queues])
        kai = {
            name: GaugeMetricFamily(name, help, labels=KAI_QUEUE_LABELS)
            for name, help in [
                ("kai_queue_info", "Queues info (1 for every queue)."),
                ("kai_queue_deserved_gpus", "Queue deserved GPUs (its GPU quota; -1 = unlimited)."),
                ("kai_queue_quota_cpu_cores", "Queue quota CPU in cores (-1 = unlimited)."),
                ("kai_queue_quota_memory_bytes", "Queue quota memory in bytes (-1 = unlimited)."),
                ("kai_queue_allocated_gpus", "Queue allocated GPUs (last cycle)."),
                ("kai_queue_allocated_cpu_cores", "Queue allocated CPU in cores (last cycle)."),
                ("kai_queue_allocated_memory_bytes", "Queue allocated memory in bytes (last cycle)."),
                ("kai_queue_fair_share_gpu", "GPU fair share of queue in GPU devices (last cycle)."),
                ("kai_queue_fair_share_cpu_cores", "CPU fair share of queue in cores (last cycle)."),
                ("kai_queue_fair_share_memory_gb", "Memory fair share of queue in GB (last cycle)."),
            ]
        }  # fmt: skip
        labels = ["queue_name", "resource"]
        portal = {
            field: GaugeMetricFamily(f"kai_portal_queue_{field}", help, labels=labels)
            for field, help in [
                ("quota", "Configured quota: GPUs, CPU cores, memory bytes; -1 = unlimited."),
                ("limit", "Configured limit per queue and resource (same units); -1 = unlimited."),
                ("deserved", "Deserved quota used by the last cycle (same units)."),
                ("fair_share", "Fair share computed by the last cycle (same units)."),
                ("allocated", "Allocated to the queue's pods as of the last cycle (same units)."),
                ("requested", "Requested by the queue's pods as of the last cycle (same units)."),
            ]
        }  # fmt: skip
        for q in queues:
            kai_labels = [q["name"], q["name"], q["display_name"]]
            kai["kai_queue_info"].add_metric(kai_labels, 1)
            kai["kai_queue_deserved_gpus"].add_metric(kai_labels, base_units("gpu", q["gpu_quota"]))
            kai["kai_queue_quota_cpu_cores"].add_metric(kai_labels, base_units("cpu", q["cpu_quota"]))
            memory_quota = base_units("memory", q["memory_quota"])
            kai["kai_queue_quota_memory_bytes"].add_metric(kai_labels, memory_quota)
            for r in RESOURCES:
                portal["quota"].add_metric([q["name"], r], base_units(r, q[f"{r}_quota"]))
                portal["limit"].add_metric([q["name"], r], base_units(r, q[f"{r}_limit"]))
                numbers = status[q["id"]][r]
                for field in ("deserved", "fair_share", "allocated", "requested"):
                    value = numbers[field]  # type: ignore[literal-required]
                    if value is not None:  # None: no cycle has looked at this queue yet
                        portal[field].add_metric([q["name"], r], base_units(r, value))
            gpu, cpu, memory = (status[q["id"]][r] for r in RESOURCES)
            if gpu["allocated"] is not None:
                kai["kai_queue_allocated_gpus"].add_metric(kai_labels, float(gpu["allocated"]))
                kai["kai_queue_fair_share_gpu"].add_metric(kai_labels, float(gpu["fair_share"] or 0))
            if cpu["allocated"] is not None:
                cpu_allocated = base_units("cpu", cpu["allocated"])
                kai["kai_queue_allocated_cpu_cores"].add_metric(kai_labels, cpu_allocated)
                kai["kai_queue_fair_share_cpu_cores"].add_metric(
                    kai_labels, base_units("cpu", cpu["fair_share"] or 0)
                )
            if memory["allocated"] is not None:
                kai["kai_queue_allocated_memory_bytes"].add_metric(
                    kai_labels, base_units("memory", memory["allocated"])
                )
                kai["kai_queue_fair_share_memory_gb"].add_metric(
                    kai_labels, base_units("memory", memory["fair_share"] or 0) / 1e9
                )
        yield from kai.values()
        yield from portal.values()

    def _pod_metrics(self, queues: list[dict]) -> Iterator[Metric]:
        names = {q["id"]: q["name"] for q in queues}
        counts = {(queue_id, state): 0 for queue_id in names for state in POD_STATES}
        rows = (
            Pod.objects.filter(state__in=POD_STATES)
            .order_by()
            .values_list("job__queue_id", "state")
            .annotate(n=Count("id"))
        )
        for queue_id, state, n in rows:
            if queue_id in names:
                counts[(queue_id, state)] = n
        family = GaugeMetricFamily(
            "kai_portal_queue_pods",
            "Pods per queue and state: pending (waiting for a node), bound and running (charged to the "
            "queue), releasing (being evicted or deleted).",
            labels=["queue_name", "state"],
        )
        for (queue_id, state), n in sorted(counts.items(), key=lambda item: (names[item[0][0]], item[0][1])):
            family.add_metric([names[queue_id], state], n)
        yield family

    def _cycle_metrics(self) -> Iterator[Metric]:
        hist = recording.CYCLE_DURATION
        per_pool = totals.read(
            [recording.CYCLES, recording.EVICTIONS, recording.OPERATION_FAILURES, *hist.names()]
        )
        got = _pools_summed(per_pool)
        cycles = CounterMetricFamily(
            "kai_portal_cycles",
            "Scheduling cycles by outcome: succeeded, failed, skipped (lock held), aborted (lost the lock).",
            labels=["outcome"],
        )  # fmt: skip
        for outcome in recording.OUTCOMES:
            if outcome != SchedulingCycle.Status.RUNNING:
                cycles.add_metric([outcome], got[recording.CYCLES].get((("outcome", outcome),), 0.0))
        yield cycles

        evictions = CounterMetricFamily(
            "kai_portal_evicted_pods",
            "Pods evicted by the scheduler, by action (reclaim, preempt, consolidation, stale_gang).",
            labels=["action"],
        )
        for action in recording.EVICTION_ACTIONS:
            evictions.add_metric([action], got[recording.EVICTIONS].get((("action", action),), 0.0))
        yield evictions

        failures = CounterMetricFamily(
            "kai_portal_cluster_operation_failures",
            "Binds and evictions the cluster refused (each is retried by a later cycle).",
            labels=["operation"],
        )
        for operation in sorted(set(recording.FAILURE_REASONS.values())):
            failures.add_metric(
                [operation], got[recording.OPERATION_FAILURES].get((("operation", operation),), 0.0)
            )
        yield failures

        buckets, total = hist.cumulative(got)
        duration = HistogramMetricFamily(
            "kai_portal_cycle_duration_seconds", "Duration of cycles that ran (succeeded, failed or aborted)."
        )
        duration.add_metric([], buckets, sum_value=total)
        yield duration

        last = last_succeeded_cycle()
        latency = GaugeMetricFamily(
            "kai_e2e_scheduling_latency_milliseconds",
            "E2e scheduling latency in milliseconds of the last succeeded cycle (observe to persist).",
        )
        stamp = GaugeMetricFamily(
            "kai_portal_last_cycle_finished_timestamp_seconds",
            "Unix time the last succeeded scheduling cycle finished (alert when it falls behind).",
        )
        if last is not None:
            latency.add_metric([], float(last[1]))
            stamp.add_metric([], last[0].timestamp())
        yield latency
        yield stamp
        yield from _pool_metrics(per_pool)


def _pools_summed(got: dict[str, dict[totals.Labels, float]]) -> dict[str, dict[totals.Labels, float]]:
    """The totals with the pool label dropped and the pools added up (pools' cycles write theirs
    apart, recording.with_pool): the cluster-wide families count every cycle."""
    out: dict[str, dict[totals.Labels, float]] = {}
    for name, rows in got.items():
        summed: dict[totals.Labels, float] = {}
        for labels, value in rows.items():
            key = tuple(pair for pair in labels if pair[0] != recording.POOL_LABEL)
            summed[key] = summed.get(key, 0.0) + value
        out[name] = summed
    return out


def _pool_metrics(got: dict[str, dict[totals.Labels, float]]) -> Iterator[Metric]:
    """Each node pool's cycle health when pools are scheduled as shards (pool_health.py)."""
    cycles = CounterMetricFamily(
        "kai_portal_pool_cycles",
        "Scheduling cycles of each node pool's own cycle (SCHEDULING_SHARDS), by outcome.",
        labels=["pool", "outcome"],
    )
    for labels, value in sorted(got[recording.CYCLES].items()):
        named = dict(labels)
        if recording.POOL_LABEL in named:
            cycles.add_metric([named[recording.POOL_LABEL], named.get("outcome", "")], value)
    yield cycles
    finished = GaugeMetricFamily(
        "kai_portal_pool_last_cycle_finished_timestamp_seconds",
        "Unix time each node pool's last succeeded cycle finished (alert when one falls behind).",
        labels=["pool"],
    )
    duration = GaugeMetricFamily(
        "kai_portal_pool_last_cycle_duration_seconds",
        "Duration of each node pool's last cycle that ran (succeeded, failed or aborted).",
        labels=["pool"],
    )
    failed = GaugeMetricFamily(
        "kai_portal_pool_failed_cycles_last_hour", "Failed cycles of each node pool in the last hour.",
        labels=["pool"],
    )  # fmt: skip
    for health in pool_health(timezone.now()):
        if health.last_succeeded_at is not None:
            finished.add_metric([health.pool], health.last_succeeded_at.timestamp())
        if health.last_duration_s is not None:
            duration.add_metric([health.pool], health.last_duration_s)
        failed.add_metric([health.pool], float(health.failed_last_hour))
    yield finished
    yield duration
    yield failed
