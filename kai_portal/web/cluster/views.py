"""The cluster overview: GPUs by node pool, job and pod counts, cycle health, allocation over time."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Min, Sum
from django.db.models.functions import TruncMinute
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from kai_portal.core.htmx import page_or_fragment
from kai_portal.history.models import Decision, SchedulingCycle, UsageSample
from kai_portal.monitoring.pool_health import pool_health
from kai_portal.nodes.models import GpuDevice, Node, NodePool
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod

CHART_HOURS = 6
RECENT_CYCLES = 20


def gpu_allocation_by_pool() -> list[dict[str, Any]]:
    """Per node pool: GPU devices, devices' worth allocated to pods on its nodes, and the share."""
    pools: dict[int, dict[str, Any]]
    pools = {p.pk: {"pool": p, "total": 0, "allocated": Decimal(0), "nodes": 0, "ready": 0}
             for p in NodePool.objects.order_by("name")}  # fmt: skip
    for pool_id, n in GpuDevice.objects.values_list("node__pool_id").annotate(n=Count("id")).order_by():
        pools[pool_id]["total"] = n
    for pool_id, nodes, ready in (
        Node.objects.values_list("pool_id").annotate(n=Count("id"), r=Count("id", filter=_ready())).order_by()
    ):
        pools[pool_id]["nodes"], pools[pool_id]["ready"] = nodes, ready
    memory_per_device = dict(
        GpuDevice.objects.values_list("node__pool_id").annotate(m=Min("memory_mib")).order_by()
    )
    held = (
        Pod.objects.filter(state__in=PodState.holding_resources(), node__isnull=False)
        .values_list("node__pool_id", "job__gpu_count", "job__gpu_fraction", "job__gpu_memory_mib",
                     "job__gpu_fraction_devices")
        .annotate(n=Count("id"))
        .order_by()
    )  # fmt: skip
    for pool_id, whole, fraction, memory, devices, n in held:
        if fraction is not None:
            per_pod = Decimal(fraction) * devices
        elif memory is not None:
            per_pod = Decimal(memory) / Decimal(memory_per_device.get(pool_id) or memory) * devices
        else:
            per_pod = Decimal(whole or 0)
        pools[pool_id]["allocated"] += per_pod * n
    rows = list(pools.values())
    for row in rows:
        row["pct"] = round(float(row["allocated"] / row["total"] * 100), 1) if row["total"] else 0.0
        row["allocated"] = row["allocated"].quantize(Decimal("0.01")).normalize()
    return rows


def _ready() -> Any:
    from django.db.models import Q

    return Q(ready=True, schedulable=True)


def allocation_chart(now: Any) -> dict[str, Any]:
    """Cluster GPU allocation per minute over the last hours: the sum over top-level queues."""
    since = now - timedelta(hours=CHART_HOURS)
    rows = (
        UsageSample.objects.filter(resource="gpu", queue__parent__isnull=True, sampled_at__gte=since)
        .annotate(minute=TruncMinute("sampled_at"))
        .values("minute")
        .annotate(
            total=Sum("allocated"), requested=Sum("requested"), samples=Count("sampled_at", distinct=True)
        )
        .order_by("minute")
    )
    labels, allocated, requested = [], [], []
    for row in rows:
        labels.append(timezone.localtime(row["minute"]).strftime("%H:%M"))
        allocated.append(round(float(row["total"]) / row["samples"], 2))
        requested.append(round(float(row["requested"]) / row["samples"], 2))
    return {"labels": labels, "allocated": allocated, "requested": requested}


def cycle_health(now: Any) -> dict[str, Any]:
    cycles = list(SchedulingCycle.objects.order_by("-started_at")[:RECENT_CYCLES])
    last = cycles[0] if cycles else None
    durations = [c.duration_ms for c in cycles if c.duration_ms is not None]
    stale_after = timedelta(seconds=settings.CYCLE_SECONDS * 3)
    return {
        "last": last,
        "recent": cycles[:8],
        "age": (now - last.started_at) if last else None,
        "stale": last is None or now - last.started_at > stale_after,
        "avg_ms": round(sum(durations) / len(durations)) if durations else None,
        "max_ms": max(durations) if durations else None,
        "failed": sum(1 for c in cycles if c.status == SchedulingCycle.Status.FAILED),
        "aborted": sum(1 for c in cycles if c.status == SchedulingCycle.Status.ABORTED),
        "cycle_seconds": settings.CYCLE_SECONDS,
        "pools": pool_health(now),  # each pool's own cycle (SCHEDULING_SHARDS); empty otherwise
    }


@login_required
def cluster_overview(request: HttpRequest) -> HttpResponse:
    """Cluster-wide capacity and health for every signed-in user (aggregates only, no job details)."""
    now = timezone.now()
    pools = gpu_allocation_by_pool()
    job_counts = dict(Job.objects.values_list("state").annotate(n=Count("id")).order_by())
    pod_counts = dict(Pod.objects.values_list("state").annotate(n=Count("id")).order_by())
    evicted = (
        Decision.objects.filter(kind=Decision.Kind.EVICTED, created_at__gte=now - timedelta(hours=1))
        .values("pod_id")
        .distinct()
        .count()
    )
    total = sum(p["total"] for p in pools)
    allocated = sum(p["allocated"] for p in pools)
    context = {
        "pools": pools,
        "gpu_total": total,
        "gpu_allocated": allocated,
        "gpu_pct": round(float(allocated / total * 100), 1) if total else 0.0,
        "jobs_pending": job_counts.get(JobState.PENDING, 0),
        "jobs_running": job_counts.get(JobState.RUNNING, 0),
        "pods_pending": pod_counts.get(PodState.PENDING, 0),
        "pods_running": pod_counts.get(PodState.RUNNING, 0) + pod_counts.get(PodState.BOUND, 0),
        "pods_evicted_hour": evicted,
        "health": cycle_health(now),
        "chart": allocation_chart(now),
        "chart_hours": CHART_HOURS,
    }
    template = page_or_fragment(request, "cluster/cluster_overview.html", "partials/cluster/_overview.html")
    return render(request, template, context)
