"""Nodes and node pools: per node its GPUs (each device's share and the pods on it), product
and memory, cordon state; per pool the GPU allocation over time from ``PoolUsageSample``.

A fixed number of queries whatever the cluster size: nodes, devices, pods on nodes, the
pods' devices, the visible jobs among them, and the pool samples (bucketed in SQL with
``TruncMinute``/``TruncHour``, which SQLite and PostgreSQL both have).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Avg
from django.db.models.functions import TruncHour, TruncMinute
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from kai_portal.nodes.models import GpuDevice, Node, NodePool, PoolUsageSample
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Job, Pod

WINDOWS = {
    "6h": (timedelta(hours=6), TruncMinute, "%H:%M"),
    "24h": (timedelta(hours=24), TruncHour, "%H:00"),
    "7d": (timedelta(days=7), TruncHour, "%a %H:00"),
}


@dataclass
class PodOnDevice:
    name: str
    job_uid: str  # empty when the user may not see the job
    share: Decimal


@dataclass
class DeviceRow:
    index: int
    model: str
    memory_mib: int
    pods: list[PodOnDevice] = field(default_factory=list)

    @property
    def used(self) -> Decimal:
        return min(Decimal(1), sum((p.share for p in self.pods), Decimal(0)))

    @property
    def pct(self) -> int:
        return round(self.used * 100)


@dataclass
class NodeRow:
    node: Node
    devices: list[DeviceRow] = field(default_factory=list)
    pods: list[PodOnDevice] = field(default_factory=list)  # pods without GPU devices (CPU only)

    @property
    def gpus_allocated(self) -> Decimal:
        return sum((d.used for d in self.devices), Decimal(0)).quantize(Decimal("0.01")).normalize()

    @property
    def products(self) -> str:
        return ", ".join(sorted({f"{d.model} ({d.memory_mib // 1024} GiB)" for d in self.devices}))


def _share(whole: int, fraction: Decimal | None, memory: int | None, device_memory: int) -> Decimal:
    if fraction is not None:
        return Decimal(fraction)
    if memory is not None:
        return Decimal(memory) / Decimal(device_memory or memory)
    return Decimal(1) if whole else Decimal(0)


def node_rows(user: Any, pool: str = "") -> list[NodeRow]:
    nodes = Node.objects.select_related("pool").order_by("pool__name", "name")
    if pool:
        nodes = nodes.filter(pool__name=pool)
    rows = {n.pk: NodeRow(node=n) for n in nodes}
    devices: dict[int, DeviceRow] = {}
    for d in GpuDevice.objects.filter(node_id__in=rows).order_by("node_id", "index"):
        devices[d.pk] = DeviceRow(index=d.index, model=d.model, memory_mib=d.memory_mib)
        rows[d.node_id].devices.append(devices[d.pk])
    held = PodState.holding_resources()
    pods = list(
        Pod.objects.filter(node_id__in=rows, state__in=held).values_list(
            "pk", "node_id", "name", "job_id", "job__uid", "job__gpu_count", "job__gpu_fraction",
            "job__gpu_memory_mib",
        )
    )  # fmt: skip
    visible = set(
        Job.objects.visible_to(user).filter(pk__in={p[3] for p in pods}).values_list("pk", flat=True)
    )
    on_devices: dict[int, list[int]] = {}
    through = Pod.gpu_devices.through
    for pod_id, device_id in through.objects.filter(pod_id__in=[p[0] for p in pods]).values_list(
        "pod_id", "gpudevice_id"
    ):
        on_devices.setdefault(pod_id, []).append(device_id)
    for pod_id, node_id, name, job_id, uid, whole, fraction, memory in pods:
        uid_text = str(uid) if job_id in visible else ""
        shown = name if job_id in visible else "(another team's pod)"
        placed = [devices[d] for d in on_devices.get(pod_id, []) if d in devices]
        if not placed:
            rows[node_id].pods.append(PodOnDevice(shown, uid_text, Decimal(0)))
        for device in placed:
            share = _share(whole, fraction, memory, device.memory_mib)
            device.pods.append(PodOnDevice(shown, uid_text, share))
    return list(rows.values())


def pool_charts(window: str) -> list[dict[str, Any]]:
    """Per pool: average allocated, requested and total GPUs per minute (per hour for 7 days)."""
    span, trunc, label = WINDOWS[window]
    since = timezone.now() - span
    rows = (
        PoolUsageSample.objects.filter(sampled_at__gte=since)
        .annotate(bucket=trunc("sampled_at"))
        .values("pool__name", "bucket")
        .annotate(a=Avg("gpus_allocated"), r=Avg("gpus_requested"), t=Avg("gpus_total"))
        .order_by("pool__name", "bucket")
    )
    charts: dict[str, dict[str, Any]] = {}
    for row in rows:
        chart = charts.setdefault(
            row["pool__name"], {"labels": [], "allocated": [], "requested": [], "total": 0.0}
        )
        chart["labels"].append(timezone.localtime(row["bucket"]).strftime(label))
        chart["allocated"].append(round(float(row["a"]), 2))
        chart["requested"].append(round(float(row["r"]), 2))
        chart["total"] = round(float(row["t"]), 2)
    return [
        {"pool": name, "id": f"pool-chart-{i}", "data": data} for i, (name, data) in enumerate(charts.items())
    ]


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    """Every node with its GPUs and pods (pods of jobs the user may not see are not named)."""
    window = request.GET.get("window", "6h")
    window = window if window in WINDOWS else "6h"
    pool = request.GET.get("pool", "")
    rows = node_rows(request.user, pool)
    context = {
        "rows": rows,
        "pools": NodePool.objects.order_by("name"),
        "pool": pool,
        "window": window,
        "windows": list(WINDOWS),
        "charts": pool_charts(window),
        "gpus_total": sum(len(r.devices) for r in rows),
        "gpus_allocated": sum((r.gpus_allocated for r in rows), Decimal(0)),
        "cordoned": sum(1 for r in rows if not r.node.schedulable),
    }
    return render(request, "cluster/node_list.html", context)
