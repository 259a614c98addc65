"""Queue position and estimated start of pending jobs (issue 10).

``forecast(now)`` looks at the cluster exactly as the next cycle would
(``build_snapshot``) and answers, for every pending job:

* its position in its leaf queue (KAI's job order, kai-semantics.md §4.2) and
  in its node pool's allocation order: the order in which the allocate action
  would pop the pending jobs (§4.1), taken from the engine's own ``JobQueue``
  with each popped job charged to its queues, as allocate does;
* the jobs ahead of it in that order;
* an estimated start: the simulated time at which the simulator
  (``scheduler.simulate``) first starts it, playing the running jobs forward
  for their remaining declared duration (``Job.duration`` minus the time since
  their pods started) and the pending jobs in order. A job the simulator
  starts in the first cycle after some job ended is estimated at that end
  time (the real loop binds it at the next cycle, a few seconds later).

"Unknown" is said honestly, with the reason: the job cannot fit even on an
empty cluster; it waits behind jobs without a declared duration (they never
end in the simulation); or it does not start within the horizon.

``cached_forecast()`` is what pages and the API use: one forecast per
scheduling cycle, kept in Django's cache under the latest cycle's id, so a
page costs one query when it is warm. Jobs submitted after that cycle have no
forecast until the next one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Min
from django.utils import timezone

import scheduler
from kai_portal.scheduling.models import SchedulingCycle
from kai_portal.scheduling.never_fits import never_fits_reason
from kai_portal.scheduling.snapshot import CycleInput, build_snapshot
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod
from scheduler import gang
from scheduler.cycle import open_session
from scheduler.ordering import JobQueue, job_request
from scheduler.simulate import simulate

HORIZON = timedelta(days=7)
# Cycles the simulator may run when the outcome depends on time alone (no fast-forward).
MAX_STEPPED_CYCLES = 3000
CACHE_SECONDS = 600

UNKNOWN_NEVER_FITS = "never_fits"
UNKNOWN_NO_DURATION = "no_duration"
UNKNOWN_HORIZON = "beyond_horizon"
UNKNOWN_NOT_YET = "not_yet_considered"


@dataclass
class Forecast:
    """Where one pending job stands and when it may start."""

    job_id: int
    pool: str
    queue_position: int | None = None  # 1 = next in its leaf queue
    queue_pending: int = 0
    cluster_position: int | None = None  # 1 = next in its node pool
    cluster_pending: int = 0
    ahead: list[int] = field(default_factory=list)  # job ids ahead in the pool's order, nearest last
    estimated_start: datetime | None = None
    unknown: str = ""  # one of the UNKNOWN_* codes when estimated_start is None
    reason: str = ""  # human text for unknown
    computed_at: datetime | None = None

    @property
    def jobs_ahead(self) -> int:
        return len(self.ahead)


# ---- ordering --------------------------------------------------------------


def pool_orders(inp: CycleInput) -> dict[str, list[str]]:
    """Per node pool: the pending engine jobs in the order allocate would pop them."""
    snap = inp.snapshot
    pools = sorted({n.pool for n in snap.nodes} | {j.pool for j in snap.jobs})
    orders: dict[str, list[str]] = {}
    for pool in pools:
        session = open_session(snap, inp.config, pool)
        queue = JobQueue(session, session.capacity)
        for job in session.jobs.values():
            qs = session.queues.get(job.queue)
            if gang.pending_tasks(session, job) and qs is not None and qs.is_leaf:
                queue.push(job)
        order: list[str] = []
        while (popped := queue.pop()) is not None:
            order.append(popped.name)
            # Charge the job's step to its queues, as a successful allocation would.
            charge = job_request(session, job)
            for qs in session.ancestors(job.queue):
                for r, v in charge.items():
                    qs.allocated[r] = scheduler.model.clean(qs.allocated[r] + v)
        orders[pool] = order
    return orders


# ---- simulation --------------------------------------------------------------


def _prepared(inp: CycleInput, terminal: set[int]) -> scheduler.Snapshot:
    """The snapshot the simulator starts from: releasing pods are gone (their job ended) or
    pending again (their job was evicted and restarts)."""
    jobs = []
    for job in inp.snapshot.jobs:
        ref = inp.index.jobs[job.name]
        tasks = []
        for t in job.tasks:
            if t.state == scheduler.TaskState.RELEASING:
                if ref.job_id in terminal:
                    continue
                t = dataclasses.replace(t, state=scheduler.TaskState.PENDING, node=None, gpu_devices=())
            tasks.append(t)
        if tasks:
            jobs.append(dataclasses.replace(job, tasks=tasks))
    return scheduler.Snapshot(nodes=inp.snapshot.nodes, queues=inp.snapshot.queues, jobs=jobs)


def forecast(now: datetime | None = None) -> dict[int, Forecast]:
    """Position and estimated start of every pending job, by job id (see the module docstring)."""
    now = now or timezone.now()
    inp = build_snapshot(now)
    index = inp.index
    ids = {ref.job_id for ref in index.jobs.values()}
    rows: dict[int, Mapping[str, Any]] = {
        j["pk"]: j for j in Job.objects.filter(pk__in=ids).values("pk", "state", "duration")
    }
    terminal = {pk for pk, r in rows.items() if r["state"] not in JobState.active()}
    started = dict(
        Pod.objects.filter(job_id__in=ids, state=PodState.RUNNING)
        .values("job_id")
        .annotate(first=Min("started_at"))
        .values_list("job_id", "first")
    )
    snap = _prepared(inp, terminal)

    durations: dict[str, float] = {}
    for job in snap.jobs:
        ref = index.jobs[job.name]
        declared = rows.get(ref.job_id, {}).get("duration")
        if declared is None:
            continue  # unknown duration: never ends in the simulation
        running = any(t.state == scheduler.TaskState.RUNNING for t in job.tasks)
        since = started.get(ref.job_id) if running else None
        elapsed = (now - since).total_seconds() if since else 0.0
        durations[job.name] = max(0.0, declared.total_seconds() - elapsed)
    no_duration = [j.name for j in snap.jobs if j.name not in durations]

    step = float(settings.CYCLE_SECONDS)
    horizon_s = HORIZON.total_seconds()
    time_dependent = inp.config.usage_enabled or any(
        (q.reclaim_min_runtime_s or 0) > 0 or (q.preempt_min_runtime_s or 0) > 0 for q in snap.queues
    )
    if time_dependent:  # no fast-forward: step coarser and stop earlier
        step = max(step, 60.0)
        horizon_s = min(horizon_s, step * MAX_STEPPED_CYCLES)
    result = simulate(snap, (), step, config=inp.config, durations=durations, until_s=horizon_s)
    ends = sorted(r.end_s for r in result.jobs.values() if r.end_s is not None)
    cycle_times = [s.t for s in result.samples]

    def start_time(first_start: float) -> float:
        # The cycle before the one that started it; a job ending in between freed the room.
        previous = max((t for t in cycle_times if t < first_start), default=None)
        if previous is None:
            return first_start
        freed = [e for e in ends if previous < e <= first_start]
        return freed[-1] if freed else first_start

    orders = pool_orders(inp)
    out: dict[int, Forecast] = {}
    for pool, order in orders.items():
        pending = [n for n in order if rows.get(index.jobs[n].job_id, {}).get("state") == JobState.PENDING]
        by_queue: dict[int, list[str]] = {}
        for name in pending:
            by_queue.setdefault(index.jobs[name].queue_id, []).append(name)
        for position, name in enumerate(pending, start=1):
            ref = index.jobs[name]
            siblings = by_queue[ref.queue_id]
            fc = Forecast(
                job_id=ref.job_id,
                pool=pool,
                queue_position=siblings.index(name) + 1,
                queue_pending=len(siblings),
                cluster_position=position,
                cluster_pending=len(pending),
                ahead=[index.jobs[n].job_id for n in pending[: position - 1]],
                computed_at=now,
            )
            rec = result.jobs.get(name)
            if rec is not None and rec.first_start_s is not None:
                fc.estimated_start = now + timedelta(seconds=start_time(rec.first_start_s))
            elif (why := never_fits_reason(inp, next(j for j in snap.jobs if j.name == name))) is not None:
                fc.unknown = UNKNOWN_NEVER_FITS
                fc.reason = why  # a queue limit, non-preemptible over quota, or no node big enough
            elif no_duration:
                fc.unknown = UNKNOWN_NO_DURATION
                fc.reason = (
                    f"it waits on {len(no_duration)} job{'s' if len(no_duration) != 1 else ''} "
                    "without a declared duration"
                )
            else:
                fc.unknown = UNKNOWN_HORIZON
                days = horizon_s / 86400
                fc.reason = f"it does not start within the next {_span(days)} of simulated time"
            out[ref.job_id] = fc
    return out


def _span(days: float) -> str:
    if days >= 1:
        n = math.floor(days)
        return f"{n} day{'s' if n != 1 else ''}"
    hours = max(1, math.floor(days * 24))
    return f"{hours} hour{'s' if hours != 1 else ''}"


# ---- cached access ----------------------------------------------------------


def _cache_key() -> str | None:
    latest = (
        SchedulingCycle.objects.filter(status=SchedulingCycle.Status.SUCCEEDED)
        .order_by("-started_at", "-pk")
        .values_list("pk", "started_at")
        .first()
    )
    if latest is None:
        return None
    return f"forecast:v1:{latest[0]}:{latest[1].isoformat()}"


def cached_forecast(job_ids: Iterable[int] | None = None) -> dict[int, Forecast]:
    """The forecast of the latest scheduling cycle (computed once per cycle; {} before the first).

    ``job_ids`` limits the answer (the whole forecast is still computed on a miss). With
    ``job_ids`` only those jobs' entries are read from the cache (one ``get_many``): the whole
    forecast holds every pending job's ``ahead`` list (quadratic in the pending jobs; tens of
    milliseconds to unpickle with a thousand of them), a page needs 50 entries of it."""
    key = _cache_key()
    if key is None:
        return {}
    if job_ids is not None:
        ids = list(job_ids)
        index_key = f"{key}:ids"
        got = cache.get_many([index_key, *(f"{key}:{pk}" for pk in ids)])
        known: set[int] | None = got.get(index_key)
        if known is not None:
            wanted = [pk for pk in ids if pk in known]
            if all(f"{key}:{pk}" in got for pk in wanted):
                return {pk: got[f"{key}:{pk}"] for pk in wanted}
    data: dict[int, Forecast] | None = cache.get(key)
    if data is None:
        data = forecast(timezone.now())
        cache.set(key, data, CACHE_SECONDS)
    if job_ids is None:
        return data
    _cache_per_job(key, data)
    return {pk: data[pk] for pk in ids if pk in data}


def _cache_per_job(key: str, data: dict[int, Forecast]) -> None:
    """Each job's forecast under its own key, and the set of job ids, for ``cached_forecast(ids)``."""
    entries: dict[str, Any] = {f"{key}:{pk}": fc for pk, fc in data.items()}
    entries[f"{key}:ids"] = set(data)  # last: readers trust the entries only once it is there
    cache.set_many(entries, CACHE_SECONDS)


def not_yet(job: Job) -> Forecast:
    """The forecast of a pending job that no cycle has looked at yet."""
    return Forecast(
        job_id=job.pk,
        pool=job.node_pool.name if job.node_pool is not None else "default",
        unknown=UNKNOWN_NOT_YET,
        reason="the next scheduling cycle has not looked at it yet",
    )


def describe(fc: Forecast, user: Any) -> dict[str, Any]:
    """A forecast for one user: the jobs ahead they may see by name, the others only counted."""
    visible = {
        j.pk: j
        for j in Job.objects.visible_to(user)
        .filter(pk__in=fc.ahead)
        .select_related("queue")
        .only("pk", "uid", "name", "queue__name")
    }
    ahead = [visible[pk] for pk in fc.ahead if pk in visible]
    return {
        "forecast": fc,
        "ahead_visible": ahead,
        "ahead_hidden": len(fc.ahead) - len(ahead),
    }
