"""Upper (and lower) bounds of a job's request: one set for the form, the API and manifests.

Every submission path ends in ``Job.full_clean()``, whose field validators use these
numbers, so the three paths refuse the same values with the same message. They are
far above any real cluster and far below what overflows a date, an integer column or
the engine's arithmetic: a job that passes them can always be scheduled (or can
always be told that it never fits), never crash a cycle.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.validators import MaxValueValidator

MAX_TASKS = 10_000
MAX_GPUS_PER_TASK = 1_024
MAX_GPU_MEMORY_MIB = 10_000_000  # 10 TB of one device's memory: more than any GPU has
MAX_FRACTION_DEVICES = 64
MAX_CPU_MILLICORES = 10_000_000  # 10,000 cores per task
MAX_MEMORY_MIB = 64 * 2**20  # 64 TiB per task
MIN_DURATION = timedelta(seconds=1)
MAX_DURATION = timedelta(days=365)
# A job submitted without a run time (form or API) runs this long on the simulated cluster.
DEFAULT_DURATION = timedelta(minutes=30)


def duration_error(value: timedelta) -> str | None:
    """Why ``value`` is not an acceptable run time, or None when it is."""
    if value < MIN_DURATION:
        return f"Duration must be at least 1 second (got {value})."
    if value > MAX_DURATION:
        return f"Duration must be at most {MAX_DURATION.days} days (got {value})."
    return None


def at_most(limit: int, what: str) -> MaxValueValidator:
    """A model validator for one bound; ``what`` may use ``%(limit_value)s``."""
    return MaxValueValidator(limit, f"{what} (got %(show_value)s).")
