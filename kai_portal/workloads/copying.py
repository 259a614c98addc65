"""'Copy and edit': a job's request as the submit form's initial values (``/jobs/submit/?copy=<uid>``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from kai_portal.queues.durations import format_go_duration
from kai_portal.workloads.forms import GpuMode
from kai_portal.workloads.models import JOB_NAME_MAX, Job


def copy_initial(user: Any, uid: str | None) -> dict[str, Any] | None:
    """Initial form values from a job the user may see, or None (no such job, or not theirs to see)."""
    if not uid:
        return None
    try:
        job = Job.objects.visible_to(user).filter(uid=uid).first()
    except ValidationError:  # not a UUID
        return None
    if job is None:
        return None
    if job.gpu_fraction is not None:
        mode = GpuMode.FRACTION
    elif job.gpu_memory_mib is not None:
        mode = GpuMode.MEMORY
    elif job.gpu_count:
        mode = GpuMode.WHOLE
    else:
        mode = GpuMode.NONE
    suffix = "-copy"
    return {
        "name": job.name[: JOB_NAME_MAX - len(suffix)].rstrip("-") + suffix,
        "queue": job.queue_id,
        "task_count": job.task_count,
        "min_member": job.min_member,
        "gpu_mode": mode,
        "gpu_count": job.gpu_count,
        "gpu_fraction": job.gpu_fraction,
        "gpu_memory_mib": job.gpu_memory_mib,
        "gpu_fraction_devices": job.gpu_fraction_devices,
        "cpu_cores": job.cpu_millicores / 1000,
        "memory_mib": job.memory_mib,
        "priority_class": job.priority_class,
        "node_pool": job.node_pool_id,
        "image": job.image,
        "command": job.command,
        "run_time": format_go_duration(job.duration) if job.duration is not None else "",
    }
