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

Nothing here runs in a web request: the scheduling worker refreshes the stored
forecast after every cycle (``forecast_store.refresh``: positions exact, the
estimate within a time budget), and pages and the API read what it stored.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Min
from django.utils import timezone

from kai_portal.previews.never_fits import never_fits_reason
from kai_portal.scheduling import engine
from kai_portal.scheduling.engine import JobQueue, job_request, open_session, simulate
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.scheduling.snapshot_index import CycleInput
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod

HORIZON = timedelta(days=7)
# Cycles the simulator may run when the outcome depends on time alone (no fast-forward).
MAX_STEPPED_CYCLES = 3000

UNKNOWN_NEVER_FITS = "never_fits"
UNKNOWN_NO_DURATION = "no_duration"
UNKNOWN_HORIZON = "beyond_horizon"
UNKNOWN_NOT_YET = "not_yet_considered"
UNKNOWN_NOT_BEFORE = "not_before"  # the budgeted simulation stopped before it started the job
# Of a budgeted estimate, the share of the remaining time the simulation may use; the rest is for
# the per-job "does it fit at all" checks, so never-fitting jobs are told apart even on a busy cluster.
SIMULATION_SHARE = 0.75


@dataclass
class Forecast:
    """Where one pending job stands and when it may start."""

    job_id: int
    pool: str
    queue_position: int | None = None  # 1 = next in its leaf queue
    queue_pending: int = 0
    cluster_position: int | None = None  # 1 = next in its node pool
    cluster_pending: int = 0
    jobs_ahead: int = 0
    # Job ids ahead in the pool's order, nearest last (filled by ``forecast()`` and for the job page).
    ahead: list[int] = field(default_factory=list)
    estimated_start: datetime | None = None
    unknown: str = ""  # one of the UNKNOWN_* codes when estimated_start is None
    reason: str = ""  # human text for unknown
    computed_at: datetime | None = None  # the cycle the positions are from
    estimated_at: datetime | None = None  # when the estimate was made; None = not estimated yet
    not_before: datetime | None = None  # UNKNOWN_NOT_BEFORE: how far the simulation got without starting it
    fit_checked_at: datetime | None = None  # when "does it fit at all" was last asked (stalest first)
    queue_id: int | None = None  # its leaf queue (``explain_order`` compares jobs within one)

    @property
    def estimate_age(self) -> str:
        """How old the estimate is, for people: "just now", "3 min ago", "2 h ago"; "" if none."""
        if self.estimated_at is None:
            return ""
        seconds = (timezone.now() - self.estimated_at).total_seconds()
        if seconds < 60:
            return "just now"
        if seconds < 3600:
            return f"{int(seconds // 60)} min ago"
        if seconds < 86400:
            return f"{int(seconds // 3600)} h ago"
        return f"{int(seconds // 86400)} d ago"


# ---- ordering --------------------------------------------------------------


def pool_orders(inp: CycleInput) -> dict[str, list[str]]:
    """Per node pool: the pending engine jobs (by key) in the order allocate would pop them."""
    snap = inp.snapshot
    pools = sorted({n.pool for n in snap.nodes} | {j.pool for j in snap.jobs})
    orders: dict[str, list[str]] = {}
    for pool in pools:
        session = open_session(snap, inp.config, pool)
        queue = JobQueue(session, session.capacity)
        for job in session.jobs.values():
            qs = session.queues.get(job.queue)
            if engine.pending_tasks(session, job) and qs is not None and qs.is_leaf:
                queue.push(job)
        order: list[str] = []
        while (popped := queue.pop()) is not None:
            order.append(popped.key)
            # Charge the job's step to its queues, as a successful allocation would.
            session.charge_step(popped, job_request(session, popped))
        orders[pool] = order
    return orders


# ---- estimates that agree with the queue's order ------------------------------


def _when(fc: Forecast) -> datetime | None:
    """The estimated start, or the lower bound, or None (unknown)."""
    if fc.estimated_start is not None:
        return fc.estimated_start
    return fc.not_before if fc.unknown == UNKNOWN_NOT_BEFORE else None


def _asks(inp: CycleInput, forecasts: Mapping[int, Forecast]) -> dict[int, tuple[float, float, float]]:
    """What each pending job's pending pods ask: GPUs, CPU millicores, memory MiB."""
    out: dict[int, tuple[float, float, float]] = {}
    for job in inp.snapshot.jobs:
        ref = inp.index.jobs.get(job.key)
        if ref is None or ref.job_id not in forecasts:
            continue
        waiting = [t for t in job.tasks if t.state == engine.TaskState.PENDING]
        out[ref.job_id] = (
            sum(t.gpu for t in waiting),
            sum(t.cpu_millis for t in waiting),
            sum(t.memory_mib for t in waiting),
        )
    return out


def explain_order(inp: CycleInput, forecasts: Mapping[int, Forecast]) -> None:
    """Make each job's estimate agree with the jobs ahead of it in its leaf queue, or say why not.

    Estimates come from simulations of different ages (a budgeted refresh keeps an older estimate
    where the new simulation only proved a lower bound), so alone each is true and side by side
    they may contradict. In its queue's order a job never starts before a job ahead of it that
    asks no more than it does (allocate pops that one first, and what does not fit for it does
    not fit for this one either): a lower bound earlier than such a job's time is raised to it, and
    the reason names that job. A job that may start before a job ahead of it that asks for more
    (room too small for that one) says so."""
    asks = _asks(inp, forecasts)
    names = {ref.job_id: ref.name for ref in inp.index.jobs.values()}
    by_queue: dict[tuple[str, int | None], list[Forecast]] = {}
    for fc in forecasts.values():
        if fc.queue_position is not None:
            by_queue.setdefault((fc.pool, fc.queue_id), []).append(fc)
    for jobs in by_queue.values():
        jobs.sort(key=lambda f: f.queue_position or 0)
        for i, fc in enumerate(jobs):
            when = _when(fc)
            if when is None or fc.job_id not in asks:
                continue
            mine = asks[fc.job_id]
            later = [
                (w, a) for a in jobs[:i] if (w := _when(a)) is not None and w > when and a.job_id in asks
            ]
            alike = [
                (w, a)
                for w, a in later
                if all(x <= y + 1e-9 for x, y in zip(asks[a.job_id], mine, strict=True))
            ]
            if alike and fc.estimated_start is None:
                w, a = max(alike, key=lambda e: e[0])
                fc.not_before = w
                said = "is estimated to start" if a.estimated_start is not None else "starts not before"
                fc.reason = (
                    f"it waits behind {names.get(a.job_id, a.job_id)} of its queue, which asks no more "
                    f"than it does and {said} then"
                )[:300]
                continue
            if alike:
                _w, a = max(alike, key=lambda e: e[0])
                older = (
                    a.estimated_at is not None
                    and fc.estimated_at is not None
                    and a.estimated_at < fc.estimated_at
                )
                fc.reason = (
                    f"estimated before {names.get(a.job_id, a.job_id)}, ahead of it in its queue: "
                    + (
                        "that estimate is from an earlier simulation"
                        if older
                        else "their placement rules differ"
                    )
                )[:300]
                continue
            if later:
                _w, a = min(later, key=lambda e: e[1].queue_position or 0)
                more = len(later)
                why = (
                    f"it may start before {names.get(a.job_id, a.job_id)}, ahead of it in its queue, "
                    "which asks for more"
                    + (
                        f" (and {more - 1} other job{'s' if more > 2 else ''} ahead that ask for more)"
                        if more > 1
                        else ""
                    )
                    + ": it fits in room they cannot use"
                )
                if why not in fc.reason:  # a kept estimate keeps its reason: say it once
                    fc.reason = (f"{fc.reason}; {why}" if fc.reason else why)[:300]


# ---- simulation --------------------------------------------------------------


def _prepared(inp: CycleInput, terminal: set[int]) -> engine.Snapshot:
    """The snapshot the simulator starts from: releasing pods are gone (their job ended) or
    pending again (their job was evicted and restarts)."""
    jobs = []
    for job in inp.snapshot.jobs:
        ref = inp.index.jobs[job.key]
        tasks = []
        for t in job.tasks:
            if t.state == engine.TaskState.RELEASING:
                if ref.job_id in terminal:
                    continue
                t = dataclasses.replace(t, state=engine.TaskState.PENDING, node=None, gpu_devices=())
            tasks.append(t)
        if tasks:
            jobs.append(dataclasses.replace(job, tasks=tasks))
    return engine.Snapshot(nodes=inp.snapshot.nodes, queues=inp.snapshot.queues, jobs=jobs)


@dataclass
class ForecastInputs:
    """What the forecast reads besides the snapshot: job states, declared durations, start times."""

    rows: dict[int, Mapping[str, Any]]
    started: dict[int, datetime]

    @classmethod
    def load(cls, inp: CycleInput) -> ForecastInputs:
        ids = {ref.job_id for ref in inp.index.jobs.values()}
        rows: dict[int, Mapping[str, Any]] = {
            j["pk"]: j for j in Job.objects.filter(pk__in=ids).values("pk", "state", "duration")
        }
        started = dict(
            Pod.objects.filter(job_id__in=ids, state=PodState.RUNNING)
            .values("job_id")
            .annotate(first=Min("started_at"))
            .values_list("job_id", "first")
        )
        return cls(rows, started)


def positions(inp: CycleInput, data: ForecastInputs, now: datetime) -> dict[int, Forecast]:
    """Every pending job's place in its leaf queue and its pool (cheap: one ordering per pool)."""
    index = inp.index
    out: dict[int, Forecast] = {}
    for pool, order in pool_orders(inp).items():
        pending = [
            k for k in order if data.rows.get(index.jobs[k].job_id, {}).get("state") == JobState.PENDING
        ]
        by_queue: dict[int, list[str]] = {}
        for key in pending:
            by_queue.setdefault(index.jobs[key].queue_id, []).append(key)
        queue_rank = {key: i for keys in by_queue.values() for i, key in enumerate(keys, start=1)}
        for position, key in enumerate(pending, start=1):
            ref = index.jobs[key]
            out[ref.job_id] = Forecast(
                job_id=ref.job_id,
                pool=pool,
                queue_position=queue_rank[key],
                queue_pending=len(by_queue[ref.queue_id]),
                cluster_position=position,
                cluster_pending=len(pending),
                jobs_ahead=position - 1,
                computed_at=now,
                queue_id=ref.queue_id,
            )
    return out


def estimate(
    inp: CycleInput,
    data: ForecastInputs,
    now: datetime,
    forecasts: Mapping[int, Forecast],
    *,
    deadline: float | None = None,
    stalest_first: Iterable[int] = (),
) -> set[int]:
    """Fill in the estimated start (or why it is unknown) of the pending jobs in ``forecasts``.

    One simulation of the whole cluster decides every job it starts. With a ``deadline``
    (``time.monotonic()`` value) the simulation may use SIMULATION_SHARE of the time left
    and stops there: jobs it started by then are exact; every job it did not reach gets a
    lower bound (``UNKNOWN_NOT_BEFORE``, ``not_before``: it starts later than that, if at all).
    Jobs the simulation did not start need one engine run each to tell "never fits" apart;
    those go in ``stalest_first`` order (then the rest) until the deadline. After a complete
    simulation the ones not checked in time are left alone (the caller keeps their older
    estimate). Returns the ids of the jobs whose estimate (or lower bound) was made now."""
    terminal = {pk for pk, r in data.rows.items() if r["state"] not in JobState.active()}
    snap = _prepared(inp, terminal)
    durations = _remaining_durations(inp, snap, data, now)
    no_duration = [j.key for j in snap.jobs if j.key not in durations]
    step, horizon_s = _step_and_horizon(inp, snap)
    simulation_deadline = _share_of(deadline, SIMULATION_SHARE)

    def simulation_out_of_time() -> bool:
        return simulation_deadline is not None and time.monotonic() >= simulation_deadline

    result = simulate(
        snap, (), step, config=inp.config, durations=durations, until_s=horizon_s,
        should_stop=simulation_out_of_time,
    )  # fmt: skip
    keys = {ref.job_id: key for key, ref in inp.index.jobs.items()}
    cycle_times = [s.t for s in result.samples]
    ends = sorted(r.end_s for r in result.jobs.values() if r.end_s is not None)
    first_starts = {
        job_id: rec.first_start_s
        for job_id in forecasts
        if (rec := result.jobs.get(keys[job_id])) is not None and rec.first_start_s is not None
    }
    decided, not_started = _record_starts(forecasts, first_starts, cycle_times, ends, now)
    if result.stopped:
        # After the last simulated cycle: that cycle is the bound (see _bound_unreached).
        decided |= _bound_unreached(forecasts, not_started, cycle_times[-1] if cycle_times else 0.0, now)
    # Jobs the simulation did not start: does each fit at all? One engine run each, the jobs checked
    # longest ago first (``stalest_first``), while the budget lasts.
    rank = {job_id: i for i, job_id in enumerate(stalest_first)}
    not_started.sort(key=lambda job_id: rank.get(job_id, len(rank)))
    for job_id in not_started:
        if deadline is not None and time.monotonic() >= deadline:
            break
        job = next(j for j in snap.jobs if j.key == keys[job_id])
        if _check_fit(inp, job, forecasts[job_id], now, result.stopped, no_duration, horizon_s):
            decided.add(job_id)
    return decided


def _remaining_durations(
    inp: CycleInput, snap: engine.Snapshot, data: ForecastInputs, now: datetime
) -> dict[str, float]:
    """Each job's run time left (its declared duration less what it has run); a job without a
    declared duration is left out: it never ends in the simulation."""
    durations: dict[str, float] = {}
    for job in snap.jobs:
        ref = inp.index.jobs[job.key]
        declared = data.rows.get(ref.job_id, {}).get("duration")
        if declared is None:
            continue
        running = any(t.state == engine.TaskState.RUNNING for t in job.tasks)
        since = data.started.get(ref.job_id) if running else None
        elapsed = (now - since).total_seconds() if since else 0.0
        durations[job.key] = max(0.0, declared.total_seconds() - elapsed)
    return durations


def _step_and_horizon(inp: CycleInput, snap: engine.Snapshot) -> tuple[float, float]:
    """The simulated cycle length and how far ahead to simulate, in seconds."""
    step = float(settings.CYCLE_SECONDS)
    horizon_s = HORIZON.total_seconds()
    time_dependent = inp.config.usage_enabled or any(
        (q.reclaim_min_runtime_s or 0) > 0 or (q.preempt_min_runtime_s or 0) > 0 for q in snap.queues
    )
    if time_dependent:  # no fast-forward: step coarser and stop earlier
        step = max(step, 60.0)
        horizon_s = min(horizon_s, step * MAX_STEPPED_CYCLES)
    return step, horizon_s


def _share_of(deadline: float | None, share: float) -> float | None:
    """The ``time.monotonic()`` value ``share`` of the way from now to ``deadline``."""
    if deadline is None:
        return None
    begin = time.monotonic()
    return begin + max(0.0, deadline - begin) * share


def _record_starts(
    forecasts: Mapping[int, Forecast],
    first_starts: Mapping[int, float],
    cycle_times: list[float],
    ends: list[float],
    now: datetime,
) -> tuple[set[int], list[int]]:
    """Set the start of every job the simulation started (``first_starts``: simulated seconds, by
    job id); returns those ids and, in ``forecasts`` order, the ids of the rest."""

    def start_time(first_start: float) -> float:
        # The cycle before the one that started it; a job ending in between freed the room.
        previous = max((t for t in cycle_times if t < first_start), default=None)
        if previous is None:
            return first_start
        freed = [e for e in ends if previous < e <= first_start]
        return freed[-1] if freed else first_start

    decided: set[int] = set()
    not_started: list[int] = []
    for job_id, fc in forecasts.items():
        if job_id in first_starts:
            fc.estimated_start = now + timedelta(seconds=start_time(first_starts[job_id]))
            fc.unknown = fc.reason = ""
            fc.estimated_at = now
            decided.add(job_id)
        else:
            not_started.append(job_id)
    return decided, not_started


def _bound_unreached(
    forecasts: Mapping[int, Forecast], not_started: list[int], reached: float, now: datetime
) -> set[int]:
    """A lower bound for every job a stopped simulation did not reach: ``reached``, its last
    simulated cycle. Starts are reported at the end that freed the room (``_record_starts``),
    after the last simulated cycle, so no job it did not start can start before then."""
    for job_id in not_started:
        fc = forecasts[job_id]
        fc.estimated_start = None
        fc.estimated_at = now
        fc.unknown = UNKNOWN_NOT_BEFORE
        fc.not_before = now + timedelta(seconds=reached)
        fc.reason = (
            f"within its time budget the simulation got {_span(reached / 86400)} ahead "
            "and had not started it by then"
        )
    return set(not_started)


def _check_fit(
    inp: CycleInput,
    job: engine.Job,
    fc: Forecast,
    now: datetime,
    stopped: bool,
    no_duration: list[str],
    horizon_s: float,
) -> bool:
    """Why a job the simulation did not start has no estimate; True when ``fc`` was decided now
    (never fits; or, after a complete simulation, waits on jobs without a duration or beyond the
    horizon). After a stopped simulation a job that fits keeps its lower bound."""
    fc.fit_checked_at = now
    why = never_fits_reason(inp, job)
    if why is not None:
        fc.estimated_start = fc.not_before = None
        fc.estimated_at = now
        fc.unknown = UNKNOWN_NEVER_FITS
        fc.reason = why  # a queue limit, non-preemptible over quota, or no node big enough
        return True
    if stopped:
        return False  # it fits: the bound stands
    fc.estimated_start = None
    fc.estimated_at = now
    if no_duration:
        fc.unknown = UNKNOWN_NO_DURATION
        fc.reason = (
            f"it waits on {len(no_duration)} job{'s' if len(no_duration) != 1 else ''} "
            "without a declared duration"
        )
    else:
        fc.unknown = UNKNOWN_HORIZON
        fc.reason = f"it does not start within the next {_span(horizon_s / 86400)} of simulated time"
    return True


def forecast(now: datetime | None = None) -> dict[int, Forecast]:
    """Position and estimated start of every pending job, by job id, with no time budget.

    The scheduling worker uses ``forecast_store.refresh`` (budgeted, stored); this whole
    computation is for tests and tools."""
    now = now or timezone.now()
    inp = build_snapshot(now)
    data = ForecastInputs.load(inp)
    out = positions(inp, data, now)
    estimate(inp, data, now, out)
    explain_order(inp, out)
    by_pool: dict[str, list[Forecast]] = {}
    for fc in out.values():
        by_pool.setdefault(fc.pool, []).append(fc)
    for pool_forecasts in by_pool.values():
        pool_forecasts.sort(key=lambda f: f.cluster_position or 0)
        for i, fc in enumerate(pool_forecasts):
            fc.ahead = [f.job_id for f in pool_forecasts[:i]]
    return out


def _span(days: float) -> str:
    if days >= 1:
        n = math.floor(days)
        return f"{n} day{'s' if n != 1 else ''}"
    if days * 24 >= 1:
        hours = math.floor(days * 24)
        return f"{hours} hour{'s' if hours != 1 else ''}"
    minutes = math.floor(days * 24 * 60)
    if minutes < 1:
        return "less than a minute"
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
