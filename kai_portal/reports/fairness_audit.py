"""Fairness audit for portal admins (issue 10): who is starved, who borrows, idle quota, blocked gangs.

Findings come from the GPU usage history (``UsageSample``, one row per queue
per cycle) and from what the scheduling worker stored after its last cycle (the
forecast's queue positions and fit checks): a request never runs the engine.

* **starved**: allocated < fair share - ``starved_margin`` while requested >
  allocated, continuously for at least ``starved_minutes``; not when every
  pending job of the queue could never start (too big for any node, above a
  limit): that demand is no fair-share problem;
* **borrowing**: allocated > deserved quota for at least ``borrowing_minutes``;
* **idle quota**: deserved quota > 0 with allocated and requested both about 0
  for at least ``idle_hours``;
* **head-of-line blocking**: the first pending job of a leaf queue (KAI job
  order) is a gang the engine cannot place now, it has waited at least
  ``blocking_minutes``, and smaller jobs sit behind it.

"Continuously since" is the sample after the last one that broke the
condition (one aggregate query per kind). Thresholds come from the
``FAIRNESS_AUDIT`` setting (a dict; missing keys take the defaults below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Avg, Count, F, Max, Min, Q
from django.utils import timezone

from kai_portal.history.models import JobForecast, UsageSample
from kai_portal.nodes.models import Node
from kai_portal.previews.forecast import UNKNOWN_NEVER_FITS
from kai_portal.queues.models import Queue
from kai_portal.workloads.choices import JobState, PodState, Preemptibility
from kai_portal.workloads.models import Job, Pod

DEFAULTS: dict[str, float] = {
    "starved_margin": 0.5,  # GPUs below fair share
    "starved_minutes": 30,
    "borrowing_minutes": 30,
    "idle_hours": 24,
    "idle_epsilon": 0.05,  # GPUs that count as "about 0"
    "blocking_minutes": 10,
}

STARVED, BORROWING, IDLE, BLOCKING = "starved", "borrowing", "idle_quota", "head_of_line"
KIND_LABELS = {
    STARVED: "Starved below fair share",
    BORROWING: "Borrowing above quota",
    IDLE: "Idle quota",
    BLOCKING: "Head-of-line blocking",
}


@dataclass
class Finding:
    """One thing an admin should look at, with the numbers behind it and what to do."""

    queue: str
    kind: str
    since: datetime
    evidence: dict[str, Any]
    summary: str
    action: str
    job_uid: str = ""
    details: list[str] = field(default_factory=list)

    @property
    def kind_label(self) -> str:
        return KIND_LABELS[self.kind]


def thresholds() -> dict[str, float]:
    return {**DEFAULTS, **settings.FAIRNESS_AUDIT}


def _num(x: Decimal | float | None) -> float:
    return round(float(x or 0), 2)


def _gpus(x: float) -> str:
    return f"{x:g} GPU{'s' if x != 1 else ''}"


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 72:
        return f"{hours} h"
    return f"{hours // 24} days"


def _runs(condition: Q, minimum: timedelta, now: datetime) -> dict[int, tuple[datetime, datetime]]:
    """Queues whose GPU samples satisfy ``condition`` from some time up to their latest sample,
    for at least ``minimum``: queue id -> (since, latest sample time)."""
    rows = (
        UsageSample.objects.filter(resource=UsageSample.Resource.GPU)
        .values("queue_id")
        .annotate(
            first=Min("sampled_at"),
            last=Max("sampled_at"),
            last_bad=Max("sampled_at", filter=~condition),
        )
        .order_by()
    )
    out: dict[int, tuple[datetime, datetime]] = {}
    for r in rows:
        if r["last_bad"] is not None and r["last_bad"] >= r["last"]:
            continue  # the latest sample breaks the condition
        since = r["first"]
        if r["last_bad"] is not None:  # the first sample after the last one that broke it
            since = (
                UsageSample.objects.filter(
                    queue_id=r["queue_id"], resource=UsageSample.Resource.GPU, sampled_at__gt=r["last_bad"]
                )
                .order_by("sampled_at")
                .values_list("sampled_at", flat=True)
                .first()
            )
        if since is not None and r["last"] - since >= minimum:
            out[r["queue_id"]] = (since, r["last"])
    return out


def _window_stats(queue_id: int, since: datetime) -> dict[str, float]:
    agg = UsageSample.objects.filter(
        queue_id=queue_id, resource=UsageSample.Resource.GPU, sampled_at__gte=since
    ).aggregate(
        allocated_avg=Avg("allocated"),
        allocated_max=Max("allocated"),
        allocated_min=Min("allocated"),
        requested_avg=Avg("requested"),
        fair_share_avg=Avg("fair_share"),
        deserved=Max("deserved"),
    )
    return {k: _num(v) for k, v in agg.items()}


def audit(now: datetime | None = None) -> list[Finding]:
    """All findings, worst kinds first (starved, head-of-line, borrowing, idle)."""
    now = now or timezone.now()
    t = thresholds()
    names = dict(Queue.objects.values_list("pk", "name"))
    leaves = set(Queue.objects.leaves().values_list("pk", flat=True))
    findings = [
        *_starved(now, t, names, leaves),
        *_borrowing(now, t, names, leaves),
        *_idle(now, t, names, leaves),
        *_head_of_line(now, t, names),
    ]
    order = {STARVED: 0, BLOCKING: 1, BORROWING: 2, IDLE: 3}
    findings.sort(key=lambda f: (order[f.kind], f.since, f.queue))
    return findings


def _starved(now: datetime, t: dict[str, float], names: dict[int, str], leaves: set[int]) -> list[Finding]:
    """Leaf queues held below their fair share while asking for more, for long enough."""
    findings: list[Finding] = []
    starved = Q(allocated__lt=F("fair_share") - Decimal(str(t["starved_margin"]))) & Q(
        requested__gt=F("allocated")
    )
    starved_runs = {
        qid: run
        for qid, run in _runs(starved, timedelta(minutes=t["starved_minutes"]), now).items()
        if qid in leaves
    }
    # Demand that can never be placed (bigger than every node, above a limit) is not starvation.
    hopeless = _queues_whose_demand_never_fits(set(starved_runs)) if starved_runs else set()
    for qid, (since, _last) in starved_runs.items():
        if qid in hopeless:
            continue
        s = _window_stats(qid, since)
        gap = round(s["fair_share_avg"] - s["allocated_avg"], 2)
        findings.append(
            Finding(
                queue=names[qid],
                kind=STARVED,
                since=since,
                evidence={**s, "gap": gap, "minutes": int((now - since).total_seconds() // 60)},
                summary=(
                    f"{names[qid]} has held {s['allocated_avg']:g} GPUs on average against a fair share of "
                    f"{s['fair_share_avg']:g} for {_span(now - since)}, "
                    f"while requesting {s['requested_avg']:g}."
                ),
                action=(
                    f"Check why reclaim does not bring {names[qid]} up to its fair share "
                    f"({gap:g} GPUs short): non-preemptible or min-runtime-protected jobs elsewhere, "
                    "or jobs that do not fit any node; raise its quota or priority if the share is wrong."
                ),
            )
        )
    return findings


def _borrowing(now: datetime, t: dict[str, float], names: dict[int, str], leaves: set[int]) -> list[Finding]:
    """Leaf queues above their quota (deserved) for long enough."""
    findings: list[Finding] = []
    borrowing = Q(deserved__gte=0) & Q(allocated__gt=F("deserved"))
    for qid, (since, _last) in _runs(borrowing, timedelta(minutes=t["borrowing_minutes"]), now).items():
        if qid not in leaves:
            continue
        s = _window_stats(qid, since)
        over_quota = round(s["allocated_avg"] - s["deserved"], 2)
        over_fs = round(s["allocated_avg"] - s["fair_share_avg"], 2)
        findings.append(
            Finding(
                queue=names[qid],
                kind=BORROWING,
                since=since,
                evidence={**s, "over_quota": over_quota, "over_fair_share": over_fs},
                summary=(
                    f"{names[qid]} has used {s['allocated_avg']:g} "
                    f"GPUs on average (peak {s['allocated_max']:g}) "
                    f"against a quota of {s['deserved']:g} for "
                    f"{_span(now - since)}: {over_quota:g} above quota, "
                    f"{over_fs:g} {'above' if over_fs >= 0 else 'below'} "
                    f"its fair share of {s['fair_share_avg']:g}."
                ),
                action=(
                    f"Fine while others are idle (borrowed GPUs are "
                    f"reclaimable if its jobs are preemptible); "
                    f"if {names[qid]} needs this steadily, raise its quota from {s['deserved']:g} to "
                    f"{math.ceil(s['allocated_avg']):g} GPUs."
                    if over_fs <= 0.5
                    else f"{names[qid]} holds {over_fs:g} GPUs above "
                    f"its fair share: make its jobs preemptible "
                    f"so reclaim can return them, or raise its quota if the use is legitimate."
                ),
            )
        )
    return findings


def _idle(now: datetime, t: dict[str, float], names: dict[int, str], leaves: set[int]) -> list[Finding]:
    """Leaf queues with a quota that neither used nor asked for GPUs for long enough."""
    findings: list[Finding] = []
    eps = Decimal(str(t["idle_epsilon"]))
    idle = Q(deserved__gt=0) & Q(allocated__lte=eps) & Q(requested__lte=eps)
    for qid, (since, _last) in _runs(idle, timedelta(hours=t["idle_hours"]), now).items():
        if qid not in leaves:
            continue
        s = _window_stats(qid, since)
        history = UsageSample.objects.filter(
            queue_id=qid,
            resource=UsageSample.Resource.GPU,
            sampled_at__gte=now - timedelta(days=settings.USAGE_RETENTION_DAYS),
        ).aggregate(peak=Max("allocated"))
        peak = _num(history["peak"])
        suggested = math.ceil(peak) if peak > s["allocated_max"] else 0
        findings.append(
            Finding(
                queue=names[qid],
                kind=IDLE,
                since=since,
                evidence={**s, "peak_in_retention": peak, "suggested_quota": suggested},
                summary=(
                    f"{names[qid]} deserves {s['deserved']:g} GPUs but has used ≤ {s['allocated_max']:g} and "
                    f"requested ≤ {t['idle_epsilon']:g} for {_span(now - since)}."
                ),
                action=(
                    f"Lower {names[qid]}'s quota from {s['deserved']:g} to {suggested} GPUs — it has used "
                    f"≤ {s['allocated_max']:g} for {_span(now - since)}"
                    + (f" (peak {peak:g} in the kept history)" if peak else "")
                    + "; unused quota is lent out anyway, but it distorts fair shares and guarantees."
                ),
            )
        )
    return findings


def _queues_whose_demand_never_fits(queue_ids: set[int]) -> set[int]:
    """Those of ``queue_ids`` with pending jobs, every one of which the worker's fit check found
    could never start (too big for every node, above a limit): that demand is no fairness problem.

    A pending job not fit-checked yet counts as one that could start, so the finding stays.
    """
    pending = Job.objects.filter(queue_id__in=queue_ids, state=JobState.PENDING)
    with_demand = set(pending.values_list("queue_id", flat=True))
    could_start = set(
        pending.exclude(stored_forecast__unknown=UNKNOWN_NEVER_FITS).values_list("queue_id", flat=True)
    )
    return with_demand - could_start


def _head_of_line(now: datetime, t: dict[str, float], names: dict[int, str]) -> list[Finding]:
    """Gangs at the head of their queue that the last cycle could not place while smaller jobs wait behind.

    Read from the forecast the worker stored after the last cycle: a job still pending there
    was not placed by that cycle, and ``queue_position`` is KAI's job order in its queue.
    """
    waited_enough = now - timedelta(minutes=t["blocking_minutes"])
    heads = (
        JobForecast.objects.filter(
            queue_position=1,
            job__state=JobState.PENDING,
            job__min_member__gt=1,
            job__created_at__lte=waited_enough,
        )
        .select_related("job")
        .order_by("pool", "cluster_position")
    )
    out: list[Finding] = []
    free_by_pool: dict[str, tuple[float, float]] | None = None
    for forecast in heads:
        row = forecast.job
        need = _task_gpus(row) * row.min_member
        behind = _jobs_behind(row, forecast.pool)
        smaller = [name for name, gpus in behind if gpus < need]
        if not smaller:
            continue
        if free_by_pool is None:  # read once, and only when some gang is blocked
            free_by_pool = _free_gpus()
        out.append(_blocking(now, names, forecast.pool, row, need, len(behind), smaller, free_by_pool))
    return out


def _jobs_behind(row: Job, pool: str) -> list[tuple[str, float]]:
    """(name, GPUs) of the jobs after ``row`` in KAI's order of its queue: those waiting in ``pool``,
    then those that started while it waited."""
    waiting = (
        JobForecast.objects.filter(job__queue_id=row.queue_id, pool=pool, queue_position__gt=1)
        .select_related("job")
        .order_by("queue_position")
    )
    behind = [(f.job.name, _task_gpus(f.job) * f.job.task_count) for f in waiting]
    # Jobs behind it in KAI's order that started while it waited: they went around it.
    behind += [
        (j.name, _task_gpus(j) * j.task_count)
        for j in Job.objects.filter(
            queue_id=row.queue_id, state__in=JobState.active(), started_at__gte=row.created_at
        ).exclude(pk=row.pk)
        if (-j.priority, j.created_at) > (-row.priority, row.created_at)
    ]
    return behind


def _blocking(
    now: datetime,
    names: dict[int, str],
    pool: str,
    row: Job,
    need: float,
    jobs_behind: int,
    smaller: list[str],
    free_by_pool: dict[str, tuple[float, float]],
) -> Finding:
    """The finding for gang ``row`` (needing ``need`` GPUs): ``smaller`` are the names of the smaller
    of the ``jobs_behind`` jobs after it."""
    free, reclaimable = free_by_pool.get(pool, (0.0, 0.0))
    largest = max(free_by_pool.values(), key=lambda v: v[0] + v[1], default=(0.0, 0.0))
    waited = now - row.created_at
    return Finding(
        queue=names[row.queue_id],
        kind=BLOCKING,
        since=row.created_at,
        job_uid=str(row.uid),
        evidence={
            "job": row.name,
            "gang_gpus": need,
            "gang_pods": row.min_member,
            "waited_minutes": int(waited.total_seconds() // 60),
            "jobs_behind": jobs_behind,
            "smaller_jobs_behind": len(smaller),
            "pool": pool,
            "pool_free_gpus": free,
            "pool_free_after_reclaim": free + reclaimable,
        },
        summary=(
            f"Gang {row.name} ({row.min_member} pods, "
            f"{_gpus(need)}) heads {names[row.queue_id]} and has waited "
            f"{_span(waited)}; {len(smaller)} smaller job{'s' if len(smaller) != 1 else ''} "
            "behind it went ahead of it or are waiting."
        ),
        action=(
            f"The gang needs {_gpus(need)}; the largest "
            f"pool has {largest[0] + largest[1]:g} free "
            "after reclaim"
            + (
                ": reduce its size or add nodes."
                if largest[0] + largest[1] < need
                else ": it can run once preemptible work elsewhere is reclaimed or ends; "
                "consider a higher priority for it, or a dedicated pool."
            )
        ),
        details=smaller[:10],
    )


def _task_gpus(job: Job) -> float:
    """GPUs one task of the job asks for, as the engine counts them (a fraction counts as itself)."""
    return float(job.gpu_fraction) if job.gpu_fraction is not None else float(job.gpu_count)


def _free_gpus() -> dict[str, tuple[float, float]]:
    """Per pool: (free GPUs now, GPUs of running preemptible jobs that reclaim could free)."""
    capacity = dict(
        Node.objects.filter(schedulable=True, ready=True)
        .values("pool__name")
        .annotate(devices=Count("gpus"))
        .values_list("pool__name", "devices")
    )
    used: dict[str, float] = {}
    preemptible: dict[str, float] = {}
    holding = Pod.objects.filter(
        node__isnull=False, state__in=[PodState.BOUND, PodState.RUNNING, PodState.RELEASING]
    )
    for pool, gpus, fraction, preemptibility, priority in holding.values_list(
        "node__pool__name", "job__gpu_count", "job__gpu_fraction", "job__preemptibility", "job__priority"
    ):
        held = float(fraction) if fraction is not None else float(gpus)
        used[pool] = used.get(pool, 0.0) + held
        # KAI: an explicit preemptibility wins, otherwise priority < 100 means preemptible.
        if preemptibility == Preemptibility.PREEMPTIBLE or (not preemptibility and priority < 100):
            preemptible[pool] = preemptible.get(pool, 0.0) + held
    return {
        p: (round(max(0.0, c - used.get(p, 0.0)), 2), round(preemptible.get(p, 0.0), 2))
        for p, c in capacity.items()
    }
