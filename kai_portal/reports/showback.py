"""Showback: GPU-hours per team and queue over a window, and GPUs allocated to pods that do not run.

**GPU-hours** come from the usage history (``UsageSample``, one row per queue per cycle): a
leaf queue's allocated GPUs in each sample, times the time one sample stands for. That time
is the window's measured average cycle interval (covered span / samples, so slow cycles are
not under-counted), or ``CYCLE_SECONDS`` when the window holds fewer than two cycles. Only
leaf queues are summed (a parent's allocation is its children's). Sums run in SQL
(``Sum`` grouped by queue and ``TruncHour``/``TruncDay``), which SQLite and PostgreSQL share.

**Idle allocated GPUs** (now): GPUs held by pods that are bound to a node but not running:
starting (bound, not yet running) or releasing (evicted or deleted, not yet gone). The portal
does not see GPU utilisation inside a running pod, so "allocated but unused by a running
pod" is not knowable here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Min, Sum
from django.db.models.functions import TruncDay, TruncHour

from kai_portal.history.models import UsageSample
from kai_portal.nodes.models import GpuDevice
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Pod

NO_TEAM = "(no team)"


@dataclass
class QueueHours:
    queue: str
    team: str
    gpu_hours: float
    avg_gpus: float
    peak_gpus: float


@dataclass
class Showback:
    since: datetime
    until: datetime
    seconds_per_sample: float
    queues: list[QueueHours]
    teams: list[tuple[str, float]]
    buckets: list[datetime]
    series: dict[str, list[float]]  # team → GPU-hours per bucket
    by_bucket: list[tuple[datetime, str, str, float]] = field(default_factory=list)  # for the CSV

    @property
    def total(self) -> float:
        return round(sum(h for _, h in self.teams), 2)


def _interval(samples: Any) -> float:
    span = samples.aggregate(first=Min("sampled_at"), last=Max("sampled_at"),
                             n=Count("sampled_at", distinct=True))  # fmt: skip
    if span["n"] and span["n"] >= 2:
        return float((span["last"] - span["first"]).total_seconds() / (span["n"] - 1))
    return float(settings.CYCLE_SECONDS)


def showback(queue_ids: list[int], since: datetime, until: datetime) -> Showback:
    samples = UsageSample.objects.filter(
        resource=UsageSample.Resource.GPU, sampled_at__gte=since, sampled_at__lt=until,
        queue_id__in=queue_ids, queue__children__isnull=True,
    )  # fmt: skip
    seconds = _interval(
        UsageSample.objects.filter(resource="gpu", sampled_at__gte=since, sampled_at__lt=until)
    )
    hours_per_sample = seconds / 3600
    rows = (
        samples.values("queue__name", "queue__team__name")
        .annotate(total=Sum("allocated"), n=Count("id"), peak=Max("allocated"))
        .order_by("queue__team__name", "queue__name")
    )
    queues = [
        QueueHours(
            queue=r["queue__name"], team=r["queue__team__name"] or NO_TEAM,
            gpu_hours=round(float(r["total"]) * hours_per_sample, 2),
            avg_gpus=round(float(r["total"]) / r["n"], 2) if r["n"] else 0.0, peak_gpus=float(r["peak"] or 0),
        )
        for r in rows
    ]  # fmt: skip
    teams: dict[str, float] = defaultdict(float)
    for q in queues:
        teams[q.team] += q.gpu_hours
    trunc = TruncHour if until - since <= timedelta(days=2) else TruncDay
    bucketed = (
        samples.annotate(bucket=trunc("sampled_at"))
        .values("bucket", "queue__name", "queue__team__name")
        .annotate(total=Sum("allocated"))
        .order_by("bucket", "queue__team__name", "queue__name")
    )
    by_bucket = [
        (
            r["bucket"],
            r["queue__team__name"] or NO_TEAM,
            r["queue__name"],
            round(float(r["total"]) * hours_per_sample, 3),
        )
        for r in bucketed
    ]
    buckets = sorted({b for b, *_ in by_bucket})
    position = {b: i for i, b in enumerate(buckets)}
    series: dict[str, list[float]] = {team: [0.0] * len(buckets) for team in sorted(teams)}
    for bucket, team, _queue, hours in by_bucket:
        series[team][position[bucket]] = round(series[team][position[bucket]] + hours, 3)
    return Showback(
        since=since, until=until, seconds_per_sample=round(seconds, 2), queues=queues,
        teams=sorted(((t, round(h, 2)) for t, h in teams.items()), key=lambda x: -x[1]),
        buckets=buckets, series=series, by_bucket=by_bucket,
    )  # fmt: skip


@dataclass
class IdleGpus:
    queue: str
    team: str
    pods: int
    gpus: Decimal
    states: list[str]


def idle_allocated(queue_ids: list[int]) -> list[IdleGpus]:
    """GPUs of pods bound to a node but not running (starting or releasing), per queue."""
    memory = GpuDevice.objects.aggregate(m=Min("memory_mib"))["m"] or 0
    rows = (
        Pod.objects.filter(
            job__queue_id__in=queue_ids, node__isnull=False, state__in=[PodState.BOUND, PodState.RELEASING]
        )
        .values_list("job__queue__name", "job__queue__team__name", "state", "job__gpu_count",
                     "job__gpu_fraction", "job__gpu_memory_mib", "job__gpu_fraction_devices")
        .annotate(n=Count("id"))
        .order_by()
    )  # fmt: skip
    out: dict[str, IdleGpus] = {}
    for queue, team, state, whole, fraction, mem, devices, n in rows:
        if fraction is not None:
            per_pod = Decimal(fraction) * devices
        elif mem is not None:
            per_pod = Decimal(mem) / Decimal(memory or mem) * devices
        else:
            per_pod = Decimal(whole or 0)
        if not per_pod:
            continue
        row = out.setdefault(queue, IdleGpus(queue, team or NO_TEAM, 0, Decimal(0), []))
        row.pods += n
        row.gpus += per_pod * n
        if state not in row.states:
            row.states.append(state)
    for row in out.values():
        row.gpus = row.gpus.quantize(Decimal("0.01")).normalize()
    return sorted(out.values(), key=lambda r: (-r.gpus, r.queue))
