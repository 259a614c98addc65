"""Requests that are allowed but probably not what the user meant: shown before submitting
(the form asks to confirm), returned as ``warnings`` by the API, and flashed after a YAML submit."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from kai_portal.previews.fitcheck import Verdict, check_fit
from kai_portal.workloads.models import Job

# KAI's gpu-memory is MiB of one device. No GPU sold has less than 1 GiB, so a request below this
# is most likely a size written in GB ("20" meaning 20 GiB).
PLAUSIBLE_GPU_MEMORY_MIB = 256


def gpu_memory_warning(job: Job) -> str:
    mib = job.gpu_memory_mib
    if mib is None or not isinstance(mib, int) or mib >= PLAUSIBLE_GPU_MEMORY_MIB:
        return ""
    return (
        f"GPU memory is in MiB: {mib} MiB is less than any GPU has. "
        f"Did you mean {mib} GiB = {mib * 1024} MiB?"
    )


def request_warnings(job: Job) -> list[str]:
    """Cheap checks on the request alone (no engine run)."""
    return [w for w in (gpu_memory_warning(job),) if w]


def submit_warnings(user: Any, job: Job) -> list[str]:
    """``request_warnings`` plus the fit check's "can never fit" verdict (one engine run)."""
    warnings = request_warnings(job)
    verdict = check_fit(user, job, timezone.now())
    if verdict.verdict == Verdict.NEVER_FITS:
        warnings.append(f"{verdict.summary} It would stay pending until the queue or the cluster changes.")
    return warnings
