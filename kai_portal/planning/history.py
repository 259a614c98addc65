"""The jobs of a window of the portal's history, as the simulator's arrivals.

Each job submitted in the window (``Job.created_at``) arrives at its own submit time, in its own
queue, with its own size (tasks, GPUs per task, gang minimum) and priority. Its run time is what it
really ran when it finished (``finished_at - started_at``: the last run, after any eviction), else
the run time it asked for (``duration``, as the simulated cluster runs it), else, for a job still
running, how long it has run so far. Jobs with none of these (never started, no duration) and jobs
that ask for no GPU are left out and counted, so the page can say what the replay does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from kai_portal.scheduling.engine import Arrival
from kai_portal.workloads.models import Job

DEFAULT_DEVICE_MEMORY_MIB = 81920


@dataclass
class WindowJobs:
    arrivals: list[Arrival] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # why -> how many

    def leave_out(self, why: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1


def count_in_window(start: datetime, end: datetime) -> int:
    return Job.objects.filter(created_at__gte=start, created_at__lt=end).count()


def window_jobs(
    start: datetime, end: datetime, now: datetime, device_memory_mib: Mapping[str, float]
) -> WindowJobs:
    """The window's jobs as arrivals at seconds after ``start``, oldest first (ties by id).

    ``device_memory_mib`` is one GPU's memory in each queue's pool (by queue name), for jobs that
    ask for GPU memory rather than a fraction."""
    out = WindowJobs()
    rows = (
        Job.objects.filter(created_at__gte=start, created_at__lt=end)
        .select_related("queue")
        .order_by("created_at", "pk")
    )
    for job in rows:
        gpu = _gpu_per_task(job, device_memory_mib.get(job.queue.name, DEFAULT_DEVICE_MEMORY_MIB))
        if gpu <= 0:
            out.leave_out("asks for no GPU")
            continue
        run_s = _run_seconds(job, now)
        if run_s is None:
            out.leave_out("no run time known (never started, no duration)")
            continue
        out.arrivals.append(
            Arrival(
                submit_s=(job.created_at - start).total_seconds(),
                queue=job.queue.name,
                tasks=job.task_count,
                gpu=gpu,
                duration_s=max(1.0, run_s),
                priority=job.priority,
                name=f"{job.queue.name}/{job.name}#{job.pk}",
                # 0 (elastic) means each pod alone; the engine reads that as a minimum of 1.
                min_available=job.min_member or 1,
            )
        )
    return out


def _gpu_per_task(job: Job, device_memory_mib: float) -> float:
    """Whole GPUs, else the fraction, else GPU memory as a fraction of a device (the pool's)."""
    if job.gpu_count:
        return float(job.gpu_count)
    if job.gpu_fraction:
        return float(job.gpu_fraction)
    if job.gpu_memory_mib:
        return min(0.99, round(job.gpu_memory_mib / (device_memory_mib or DEFAULT_DEVICE_MEMORY_MIB), 2))
    return 0.0


def _run_seconds(job: Job, now: datetime) -> float | None:
    if job.finished_at and job.started_at and job.finished_at > job.started_at:
        return (job.finished_at - job.started_at).total_seconds()
    if job.duration:
        return job.duration.total_seconds()
    if job.started_at:
        return (now - job.started_at).total_seconds()
    return None
