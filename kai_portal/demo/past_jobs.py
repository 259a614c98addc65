"""A past week of finished jobs, so the capacity planner has history to replay on ``make run``.

The rows are what a week of the portal would have left: each job with its submit time, size,
start and finish, in a team's leaf queue, finished (succeeded). Arrivals follow a working day
(most between 08:00 and 20:00 UTC) from a seeded random generator, so the same seed gives the
same week. Idempotent: nothing is added when any job of the name prefix exists.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from kai_portal.queues.models import Queue
from kai_portal.workloads.choices import JobState
from kai_portal.workloads.models import Job

PREFIX = "past-"


@dataclass(frozen=True)
class Load:
    """How busy one queue was: jobs per day, GPUs per task and tasks to choose from, run time."""

    jobs_per_day: int
    gpus: Sequence[int] = (1, 2, 4, 8)
    tasks: Sequence[int] = (1, 1, 2)
    run_minutes: tuple[int, int] = (20, 240)


# The demo's team queues in the A100 and H100 pools (fractional serving is left to the live demo).
DEMO_LOADS = {
    "nlp": Load(14, gpus=(2, 4, 8), run_minutes=(30, 360)),
    "vision": Load(12, gpus=(2, 4, 8), run_minutes=(30, 360)),
    "recsys": Load(8, gpus=(2, 4)),
    "nlp-h100": Load(6, gpus=(4, 8), tasks=(1, 2)),
    "vision-h100": Load(4, gpus=(2, 4, 8)),
}


def seed_past_week(
    now: datetime, loads: dict[str, Load] | None = None, *, days: int = 7, seed: int = 31
) -> int:
    """Create ``days`` days of finished jobs ending at ``now`` in the named queues; returns how many."""
    if Job.objects.filter(name__startswith=PREFIX).exists():
        return 0
    rng = random.Random(seed)
    queues = {q.name: q for q in Queue.objects.filter(name__in=list(loads or DEMO_LOADS))}
    start = now - timedelta(days=days)
    rows: list[Job] = []
    for name, load in sorted((loads or DEMO_LOADS).items()):
        queue = queues.get(name)
        if queue is None:
            continue
        for day in range(days):
            for _ in range(load.jobs_per_day):
                submitted = start + timedelta(days=day, hours=rng.uniform(8, 20))
                run = timedelta(minutes=rng.randint(*load.run_minutes))
                # Its own start: as the live cluster would have had it (the replay re-decides it).
                started = submitted + timedelta(minutes=rng.randint(0, 30))
                tasks = rng.choice(load.tasks)
                rows.append(
                    Job(
                        name=f"{PREFIX}{name}-{len(rows):04d}",
                        queue=queue,
                        task_count=tasks,
                        min_member=tasks,
                        gpu_count=rng.choice(load.gpus),
                        priority=50,
                        duration=run,
                        state=JobState.SUCCEEDED,
                        created_at=submitted,
                        started_at=started,
                        finished_at=started + run,
                        image="nvcr.io/nvidia/pytorch:24.08-py3",
                    )
                )
    rows = [r for r in rows if r.finished_at is not None and r.finished_at <= now]
    Job.objects.bulk_create(rows)
    return len(rows)
