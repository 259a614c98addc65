"""Real GPU use from NVIDIA's DCGM exporter, read through Prometheus, per job; and what pages show of it.

Off unless ``PROMETHEUS_URL`` is set. The worker reads (``read_gpu_use``, a periodic Celery task):
for the pods that hold GPUs now it asks Prometheus for each (pod, GPU) series' mean of
``DCGM_FI_DEV_GPU_UTIL`` and ``DCGM_FI_DEV_FB_USED`` over ``GPU_USE_WINDOW_MINUTES``, matches the
series' ``namespace`` and ``pod`` labels (dcgm-exporter's labels with its Kubernetes pod mapping on)
to the portal's pods, and stores one ``JobGpuUse`` per job. Pages only read those rows
(``job_gpu_use``, ``showback_gpu_use``) and say how old they are; a page never calls Prometheus.

A read that fails (Prometheus down, slow, an error, an answer that is not the API's) stores a
``GpuUseRead`` saying so and changes no job's values: pages show the last values as stale with
that note. The mapping is described in ``docs/gpu-use.md``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q
from django.utils import timezone

from kai_portal.monitoring import prometheus
from kai_portal.monitoring.models import GpuUseRead, JobGpuUse
from kai_portal.nodes.models import GpuDevice
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod

UTILISATION = "DCGM_FI_DEV_GPU_UTIL"
MEMORY_USED = "DCGM_FI_DEV_FB_USED"
# One series per (pod, GPU): dcgm-exporter names the GPU by index and UUID. Prometheus's own target
# labels (instance, job) are averaged away, so two scrapes of one exporter count once.
SERIES_KEY = ("namespace", "pod", "gpu", "UUID")
READ_HISTORY = timedelta(days=1)  # GpuUseRead rows kept: enough to say since when reads fail
NO_TEAM = "(no team)"


def enabled() -> bool:
    return bool(settings.PROMETHEUS_URL)


def stale_after() -> timedelta:
    """A reading older than three read intervals is stale (the worker or Prometheus fell behind)."""
    return timedelta(seconds=3 * settings.GPU_USE_READ_SECONDS)


# --- reading (the worker) ------------------------------------------------------------------------


def _targets() -> dict[tuple[str, str], int]:
    """``(namespace, pod name) -> job id`` for the pods holding GPUs on a node now."""
    gpu_jobs = (
        Q(job__gpu_count__gt=0) | Q(job__gpu_fraction__isnull=False) | Q(job__gpu_memory_mib__isnull=False)
    )
    rows = (
        Pod.objects.filter(gpu_jobs, node__isnull=False, state__in=PodState.holding_resources())
        .values_list("job_id", "name", "job__namespace", "job__queue__name")
        .order_by()
    )
    return {(namespace or queue, name): job_id for job_id, name, namespace, queue in rows}


def _string(text: str) -> str:
    """A PromQL string literal (backslashes and quotes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _promql(metric: str, namespaces: set[str], window_minutes: int) -> str:
    # Only the namespaces the portal has GPU pods in: the answer stays as small as the portal's share.
    selector = f'namespace=~{_string("|".join(re.escape(n) for n in sorted(namespaces)))},pod!=""'
    by = ", ".join(SERIES_KEY)
    return f"avg by ({by}) (avg_over_time({metric}{{{selector}}}[{window_minutes}m]))"


def _series_order(sample: prometheus.Sample) -> tuple[str, ...]:
    return tuple(sample.labels.get(key, "") for key in SERIES_KEY)


@dataclass
class _JobSums:
    utilisation: list[float] = field(default_factory=list)
    memory: float = 0.0
    memory_seen: bool = False


def read_gpu_use(now: datetime | None = None) -> GpuUseRead:
    """Read the DCGM series of the pods holding GPUs and store each job's means. Never raises for
    Prometheus's faults: the returned (and stored) ``GpuUseRead`` says what happened."""
    now = now or timezone.now()
    GpuUseRead.objects.filter(attempted_at__lt=now - READ_HISTORY).delete()
    targets = _targets()
    if not targets:
        return GpuUseRead.objects.create(
            attempted_at=now, outcome=GpuUseRead.Outcome.OK, message="no GPU pods"
        )
    namespaces = {namespace for namespace, _ in targets}
    limit = settings.GPU_USE_MAX_SERIES
    window = settings.GPU_USE_WINDOW_MINUTES

    def ask(metric: str) -> list[prometheus.Sample]:
        return prometheus.query(
            settings.PROMETHEUS_URL, _promql(metric, namespaces, window),
            timeout=float(settings.GPU_USE_TIMEOUT_SECONDS), max_bytes=limit * 1024 + 65_536,
        )  # fmt: skip

    try:
        utilisation, memory = ask(UTILISATION), ask(MEMORY_USED)
    except prometheus.PrometheusError as exc:
        return GpuUseRead.objects.create(attempted_at=now, outcome=exc.kind, message=exc.message)
    truncated = len(utilisation) > limit or len(memory) > limit
    # Prometheus returns series in no set order: sort, so a bound leaves out the same ones each time.
    utilisation.sort(key=_series_order)
    memory.sort(key=_series_order)
    sums: dict[int, _JobSums] = defaultdict(_JobSums)
    for sample in utilisation[:limit]:
        job_id = targets.get((sample.labels.get("namespace", ""), sample.labels.get("pod", "")))
        if job_id is not None:
            sums[job_id].utilisation.append(sample.value)
    for sample in memory[:limit]:
        job_id = targets.get((sample.labels.get("namespace", ""), sample.labels.get("pod", "")))
        if job_id is not None:
            sums[job_id].memory += sample.value
            sums[job_id].memory_seen = True
    threshold = settings.GPU_IDLE_THRESHOLD_PERCENT
    rows = []
    for job_id in sorted(set(targets.values())):
        s = sums.get(job_id, _JobSums())
        rows.append(JobGpuUse(
            job_id=job_id, read_at=now, window_seconds=window * 60, gpus_seen=len(s.utilisation),
            idle_gpus_seen=sum(1 for u in s.utilisation if u < threshold),
            mean_utilisation=round(sum(s.utilisation) / len(s.utilisation), 2) if s.utilisation else None,
            memory_used_mib=round(s.memory, 1) if s.memory_seen else None,
        ))  # fmt: skip
    with transaction.atomic():
        JobGpuUse.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["job"],
            update_fields=["read_at", "window_seconds", "gpus_seen", "idle_gpus_seen", "mean_utilisation",
                           "memory_used_mib"],
        )  # fmt: skip
        message = f"{len(sums)} of {len(rows)} GPU job(s) had DCGM series"
        if truncated:
            message += f"; more than GPU_USE_MAX_SERIES ({limit:,}) series, the rest were left out"
        return GpuUseRead.objects.create(
            attempted_at=now, outcome=GpuUseRead.Outcome.OK, message=message,
            series=min(len(utilisation), limit), jobs=len(sums), truncated=truncated,
        )  # fmt: skip


# --- what pages show --------------------------------------------------------------------------


@dataclass
class ReadStatus:
    """The latest read attempt, in words for a page's note (``note`` empty when all is well)."""

    latest: GpuUseRead | None
    last_ok_at: datetime | None
    note: str

    @property
    def failing(self) -> bool:
        return self.latest is not None and self.latest.outcome != GpuUseRead.Outcome.OK


def read_status(now: datetime) -> ReadStatus:
    latest = GpuUseRead.objects.first()
    last_ok = (
        GpuUseRead.objects.filter(outcome=GpuUseRead.Outcome.OK)
        .values_list("attempted_at", flat=True)
        .first()
    )
    if latest is None:
        note = f"GPU use has not been read yet: the worker reads it every {settings.GPU_USE_READ_SECONDS} s."
    elif latest.outcome != GpuUseRead.Outcome.OK:
        since = "" if last_ok is None else f" Last good read {timezone.localtime(last_ok):%Y-%m-%d %H:%M:%S}."
        at = timezone.localtime(latest.attempted_at)
        note = f"{latest.get_outcome_display()} at {at:%H:%M:%S}: {latest.message}.{since}"
    elif latest.attempted_at < now - stale_after():
        note = (
            f"GPU use was last read {timezone.localtime(latest.attempted_at):%Y-%m-%d %H:%M:%S}: "
            "the worker has not read it since (is the Celery worker or beat running?)."
        )
    else:
        note = ""
    return ReadStatus(latest=latest, last_ok_at=last_ok, note=note)


def _device_memory() -> int:
    return GpuDevice.objects.aggregate(m=Min("memory_mib"))["m"] or 0


def gpus_per_pod(whole: int | None, fraction: Any, memory_mib: int | None, devices: int | None,
                 device_memory: int) -> Decimal:  # fmt: skip
    """The GPUs one pod of a job holds: whole GPUs, or its share of ``devices`` shared GPUs."""
    if fraction is not None:
        return Decimal(fraction) * (devices or 1)
    if memory_mib is not None:
        return Decimal(memory_mib) / Decimal(device_memory or memory_mib) * (devices or 1)
    return Decimal(whole or 0)


@dataclass
class JobUse:
    """One job's GPU use, as its page shows it."""

    allocated_gpus: Decimal
    gpu_hours: float
    reading: JobGpuUse | None
    fresh: bool
    idle: bool
    threshold: int
    status: ReadStatus

    @property
    def missing(self) -> bool:
        """Read, but Prometheus had no DCGM series for its pods."""
        return self.reading is not None and self.reading.gpus_seen == 0


def job_gpu_use(job: Job, now: datetime | None = None) -> JobUse | None:
    """What the job page shows; None when the feature is off or the job asks for no GPU."""
    if not enabled():
        return None
    now = now or timezone.now()
    per_pod = gpus_per_pod(job.gpu_count, job.gpu_fraction, job.gpu_memory_mib, job.gpu_fraction_devices,
                           _device_memory() if job.gpu_memory_mib is not None else 0)  # fmt: skip
    if not per_pod:
        return None
    holding = 0
    seconds = 0.0  # each pod's last run: start to finish, or to now while it runs
    for state, node_id, started, finished in job.pods.values_list(
        "state", "node_id", "started_at", "finished_at"
    ):
        holding += node_id is not None and state in PodState.holding_resources()
        if started is not None and (state == PodState.RUNNING or finished is not None):
            seconds += max(0.0, ((finished or now) - started).total_seconds())
    reading = JobGpuUse.objects.filter(job=job).first()
    fresh = reading is not None and reading.read_at >= now - stale_after()
    threshold = settings.GPU_IDLE_THRESHOLD_PERCENT
    idle = bool(
        fresh and reading and reading.gpus_seen and job.state == JobState.RUNNING
        and reading.mean_utilisation is not None and reading.mean_utilisation < threshold
    )  # fmt: skip
    return JobUse(
        allocated_gpus=(per_pod * holding).quantize(Decimal("0.01")).normalize(),
        gpu_hours=round(float(per_pod) * seconds / 3600, 2), reading=reading, fresh=fresh, idle=idle,
        threshold=threshold, status=read_status(now),
    )  # fmt: skip


@dataclass
class UseRow:
    """A queue's (or a team's) GPUs now: allocated, measured by DCGM, idle among them, and without data."""

    name: str
    team: str
    allocated_gpus: Decimal = Decimal(0)
    measured_gpus: int = 0
    idle_gpus: int = 0
    _utilisation_sum: float = 0.0
    gpu_hours: float = 0.0

    @property
    def mean_utilisation(self) -> float | None:
        return round(self._utilisation_sum / self.measured_gpus, 1) if self.measured_gpus else None

    @property
    def unmeasured_gpus(self) -> Decimal:
        return max(Decimal(0), self.allocated_gpus - self.measured_gpus).quantize(Decimal("0.01")).normalize()

    def add(self, other: UseRow) -> None:
        self.allocated_gpus += other.allocated_gpus
        self.measured_gpus += other.measured_gpus
        self.idle_gpus += other.idle_gpus
        self._utilisation_sum += other._utilisation_sum
        self.gpu_hours += other.gpu_hours


@dataclass
class ShowbackUse:
    queues: list[UseRow]
    teams: list[UseRow]
    threshold: int
    window_minutes: int
    status: ReadStatus


def showback_gpu_use(queue_ids: list[int], queue_hours: list[tuple[str, str, float]],
                     now: datetime | None = None) -> ShowbackUse | None:  # fmt: skip
    """Per queue and team, over the queues in ``queue_ids`` (the ones the user may see): GPUs held by
    pods now, those DCGM measured (fresh readings only), idle ones, and the showback window's
    GPU-hours (``queue_hours``: queue, team, hours) beside them. None when the feature is off."""
    if not enabled():
        return None
    now = now or timezone.now()
    device_memory = _device_memory()
    holding = Pod.objects.filter(
        job__queue_id__in=queue_ids, node__isnull=False, state__in=PodState.holding_resources()
    )
    pods = holding.values_list(
        "job_id", "job__queue__name", "job__queue__team__name", "job__gpu_count", "job__gpu_fraction",
        "job__gpu_memory_mib", "job__gpu_fraction_devices",
    ).order_by()  # fmt: skip
    rows: dict[str, UseRow] = {
        queue: UseRow(queue, team, gpu_hours=hours) for queue, team, hours in queue_hours
    }
    job_queue: dict[int, str] = {}
    for job_id, queue, team, whole, fraction, memory, devices in pods:
        per_pod = gpus_per_pod(whole, fraction, memory, devices, device_memory)
        if not per_pod:
            continue
        row = rows.setdefault(queue, UseRow(queue, team or NO_TEAM))
        row.allocated_gpus += per_pod
        job_queue[job_id] = queue
    fresh = JobGpuUse.objects.filter(job_id__in=job_queue, read_at__gte=now - stale_after(), gpus_seen__gt=0)
    for job_id, seen, idle, mean in fresh.values_list(
        "job_id", "gpus_seen", "idle_gpus_seen", "mean_utilisation"
    ):
        row = rows[job_queue[job_id]]
        row.measured_gpus += seen
        row.idle_gpus += idle
        row._utilisation_sum += (mean or 0.0) * seen
    teams: dict[str, UseRow] = {}
    for row in rows.values():
        teams.setdefault(row.team, UseRow(row.team, row.team)).add(row)
    for row in [*rows.values(), *teams.values()]:
        row.allocated_gpus = row.allocated_gpus.quantize(Decimal("0.01")).normalize()
        row.gpu_hours = round(row.gpu_hours, 2)
    return ShowbackUse(
        queues=sorted(rows.values(), key=lambda r: (-r.idle_gpus, r.team, r.name)),
        teams=sorted(teams.values(), key=lambda r: (-r.idle_gpus, r.name)),
        threshold=settings.GPU_IDLE_THRESHOLD_PERCENT, window_minutes=settings.GPU_USE_WINDOW_MINUTES,
        status=read_status(now),
    )  # fmt: skip
