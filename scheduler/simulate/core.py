"""Play job arrivals through repeated scheduling cycles in simulated time.

The simulator owns the cluster state between cycles: it turns its jobs into a
:class:`~scheduler.model.Snapshot` at each cycle time, runs
:func:`~scheduler.cycle.run_cycle`, and applies the result:

* ``Allocated`` tasks start running where they were placed (same GPU devices);
* a task that was running and comes back ``Releasing`` (reclaimed, preempted,
  stale gang) or ``Pipelined`` (moved by consolidation) is an eviction: its
  whole job stops, goes back to pending and later restarts from scratch
  (the eviction grace period is zero: the GPUs are free at the next cycle);
* ``Pipelined`` pending tasks stay pending (they bind in a later cycle);
* a job finishes ``duration_s`` after it started; its GPUs are accounted free
  from that exact time and the scheduler sees them at the next cycle.

Everything is deterministic: same input, same output.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.cycle import run_cycle
from scheduler.model import Config, Job, Node, Queue, Snapshot, Task, TaskState
from scheduler.overcommit import double_booked_gpus
from scheduler.result import CycleResult

INF = math.inf
# Newer engines know when a job last had pods evicted (preemption delay); older ones do not.
_HAS_LAST_EVICTION = "last_eviction_s" in {f.name for f in dataclasses.fields(Job)}


@dataclass(frozen=True)
class Arrival:
    """One job submitted to the simulated cluster."""

    submit_s: float
    queue: str
    tasks: int = 1
    gpu: float = 1.0  # per task: whole GPUs (int >= 1) or a fraction 0 < x < 1
    duration_s: float = 3600.0
    priority: int = 50
    name: str = ""
    min_available: int | None = None


@dataclass
class JobRecord:
    """What happened to one job during the simulation."""

    name: str
    queue: str
    submit_s: float
    duration_s: float
    gpu: float  # GPUs of the whole job (sum over tasks)
    tasks: int
    initial: bool = False  # part of the starting snapshot rather than an arrival
    first_start_s: float | None = None
    start_s: float | None = None  # start of the current run
    end_s: float | None = None  # when it finished
    restarts: int = 0
    evicted_tasks: int = 0
    gpu_seconds: float = 0.0  # GPU x seconds held by its tasks, runs lost to evictions included

    @property
    def state(self) -> str:
        if self.end_s is not None:
            return "finished"
        return "running" if self.start_s is not None else "pending"

    @property
    def wait_s(self) -> float | None:
        """Seconds from submission to the first start (None: never started)."""
        return None if self.first_start_s is None else self.first_start_s - self.submit_s

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "state": self.state,
            "submit_s": self.submit_s,
            "first_start_s": self.first_start_s,
            "end_s": self.end_s,
            "wait_s": self.wait_s,
            "duration_s": None if math.isinf(self.duration_s) else self.duration_s,
            "gpu": self.gpu,
            "tasks": self.tasks,
            "restarts": self.restarts,
            "evicted_tasks": self.evicted_tasks,
            "gpu_seconds": round(self.gpu_seconds, 6),
        }


@dataclass
class Sample:
    """State right after the cycle at time ``t`` (leaf queues only)."""

    t: float
    allocated_gpu: float
    running_jobs: int
    pending_jobs: int
    queue_allocated: dict[str, float]
    queue_fair_share: dict[str, float]
    queue_pending_tasks: dict[str, int]
    decisions: int


@dataclass
class EvictionRecord:
    t: float
    task: str
    job: str
    queue: str
    reason: str


@dataclass
class SimResult:
    jobs: dict[str, JobRecord]
    samples: list[Sample]
    # Total allocated GPUs as a step function: (time, value from that time on).
    allocation: list[tuple[float, float]]
    evictions: list[EvictionRecord]
    cycles: int
    engine_cycles: int
    end_s: float
    engine_seconds: float
    capacity_gpu: float
    leaf_queues: list[str]
    # Engine cycles whose result held a GPU device twice (Running/Allocated/Pipelined/Releasing).
    double_booked_cycles: int = 0
    # True when ``should_stop`` ended the run early: jobs not started by ``end_s`` are undecided.
    stopped: bool = False

    # ---- bookkeeping -------------------------------------------------------
    def gpu_seconds_allocated(self) -> float:
        """Integral of the allocation step function from 0 to ``end_s``."""
        total = 0.0
        for (t0, v), (t1, _) in zip(self.allocation, [*self.allocation[1:], (self.end_s, 0.0)], strict=True):
            total += v * (max(t1, t0) - t0)
        return total

    def gpu_seconds_run(self) -> float:
        return sum(j.gpu_seconds for j in self.jobs.values())

    def counts(self) -> dict[str, int]:
        out = {"finished": 0, "running": 0, "pending": 0}
        for j in self.jobs.values():
            out[j.state] += 1
        return out

    # ---- reports -----------------------------------------------------------
    def wait_stats(self) -> dict[str, dict[str, float | int | None]]:
        """Per queue: jobs started, median / p95 / mean wait (s), jobs never started."""
        out: dict[str, dict[str, float | int | None]] = {}
        for q in sorted({j.queue for j in self.jobs.values()}):
            jobs = [j for j in self.jobs.values() if j.queue == q and not j.initial]
            waits = sorted(w for j in jobs if (w := j.wait_s) is not None)
            out[q] = {
                "jobs": len(jobs),
                "started": len(waits),
                "never_started": len(jobs) - len(waits),
                "median_s": percentile(waits, 50),
                "p95_s": percentile(waits, 95),
                "mean_s": round(sum(waits) / len(waits), 3) if waits else None,
            }
        return out

    def utilisation(self) -> float:
        """Mean allocated GPUs over capacity, over the whole run."""
        if self.end_s <= 0 or self.capacity_gpu <= 0:
            return 0.0
        return self.gpu_seconds_allocated() / (self.end_s * self.capacity_gpu)

    def fairness(self, since_s: float = 0.0, saturated_only: bool = True) -> dict[str, Any]:
        """Allocation against fair share over the samples after ``since_s``.

        Only samples where every leaf queue still has pending tasks count when
        ``saturated_only`` (all queues want more than they hold). Deviation is
        ``allocated - fair_share`` in GPUs; Jain's index is taken over each
        queue's mean normalised share ``allocated / fair_share``."""
        queues = [q for q in self.leaf_queues if any(s.queue_fair_share.get(q, 0) > 0 for s in self.samples)]
        picked = [
            s
            for s in self.samples
            if s.t >= since_s
            and (not saturated_only or all(s.queue_pending_tasks.get(q, 0) > 0 for q in queues))
        ]
        per_queue: dict[str, dict[str, float]] = {}
        all_devs: list[float] = []
        for q in queues:
            devs = [s.queue_allocated.get(q, 0.0) - s.queue_fair_share.get(q, 0.0) for s in picked]
            all_devs.extend(abs(d) for d in devs)
            alloc = sum(s.queue_allocated.get(q, 0.0) for s in picked) / max(1, len(picked))
            fs = sum(s.queue_fair_share.get(q, 0.0) for s in picked) / max(1, len(picked))
            per_queue[q] = {
                "mean_allocated": round(alloc, 3),
                "mean_fair_share": round(fs, 3),
                "normalised_share": round(alloc / fs, 4) if fs > 0 else 0.0,
                "max_abs_dev": round(max((abs(d) for d in devs), default=0.0), 3),
                "mean_abs_dev": round(sum(abs(d) for d in devs) / max(1, len(devs)), 3),
            }
        shares = [v["normalised_share"] for v in per_queue.values()]
        return {
            "samples": len(picked),
            "since_s": since_s,
            "queues": per_queue,
            "max_abs_dev": round(max(all_devs, default=0.0), 3),
            "mean_abs_dev": round(sum(all_devs) / max(1, len(all_devs)), 3),
            "max_abs_dev_fraction_of_capacity": round(
                max(all_devs, default=0.0) / self.capacity_gpu if self.capacity_gpu else 0.0, 4
            ),
            "jain": round(jain(shares), 4),
        }

    def fairness_series(self, every: int = 1) -> list[dict[str, Any]]:
        """Per sample: max |allocated - fair share| over the leaf queues."""
        out = []
        for s in self.samples[::every]:
            devs = [
                abs(s.queue_allocated.get(q, 0.0) - s.queue_fair_share.get(q, 0.0)) for q in self.leaf_queues
            ]
            out.append({"t": s.t, "max_abs_dev": round(max(devs, default=0.0), 3)})
        return out

    def estimated_start(self, job: str) -> float | None:
        rec = self.jobs.get(job)
        return None if rec is None else rec.first_start_s

    def summary(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "engine_cycles": self.engine_cycles,
            "engine_seconds": round(self.engine_seconds, 3),
            "end_s": self.end_s,
            "capacity_gpu": self.capacity_gpu,
            "jobs": self.counts(),
            "utilisation": round(self.utilisation(), 4),
            "gpu_seconds_allocated": round(self.gpu_seconds_allocated(), 3),
            "gpu_seconds_run": round(self.gpu_seconds_run(), 3),
            "evictions": len(self.evictions),
            "double_booked_gpu_cycles": self.double_booked_cycles,
            "evictions_by_reason": dict(sorted(Counter(e.reason for e in self.evictions).items())),
            "restarts": sum(j.restarts for j in self.jobs.values()),
            "wait": self.wait_stats(),
        }

    def to_json(self, series_every: int = 1) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "fairness": self.fairness(),
            "allocation": [[t, v] for t, v in self.allocation],
            "samples": [
                {
                    "t": s.t,
                    "allocated_gpu": s.allocated_gpu,
                    "running_jobs": s.running_jobs,
                    "pending_jobs": s.pending_jobs,
                    "queue_allocated": s.queue_allocated,
                    "queue_fair_share": s.queue_fair_share,
                }
                for s in self.samples[::series_every]
            ],
            "evictions": [dataclasses.asdict(e) for e in self.evictions],
            "jobs": {n: j.to_json() for n, j in self.jobs.items()},
        }


def percentile(sorted_values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(pct / 100 * len(sorted_values)) - 1))
    return round(float(sorted_values[k]), 3)


def jain(xs: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one holds everything."""
    if not xs:
        return 1.0
    sq = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * sq) if sq > 0 else 1.0


# ---- the simulation ----------------------------------------------------------


@dataclass
class _TaskState:
    task: Task
    gpu: float  # GPUs it is charged when running
    running: bool = False
    node: str | None = None
    devices: tuple[int, ...] = ()
    since: float = 0.0


@dataclass
class _Live:
    template: Job
    record: JobRecord
    tasks: list[_TaskState]
    end_at: float = INF  # planned finish of the current run
    last_start_offset: float = 0.0  # for initial running jobs: seconds already run at t=0
    running_tasks: int = 0
    last_eviction_at: float | None = None

    def gang(self) -> int:
        return self.template.gang_min


@dataclass
class _Counter:
    value: float = 0.0
    points: list[tuple[float, float]] = field(default_factory=list)

    def add(self, t: float, delta: float) -> None:
        self.value = round(self.value + delta, 6)
        if self.points and self.points[-1][0] == t:
            self.points[-1] = (t, self.value)
        else:
            self.points.append((t, self.value))


def arrival_job(a: Arrival, name: str) -> Job:
    tasks = [Task(f"{name}-{i}", job=name, gpu=a.gpu) for i in range(a.tasks)]
    return Job(name, queue=a.queue, priority=a.priority, min_available=a.min_available, tasks=tasks)


def _task_gpu(task: Task, nodes: Mapping[str, Node], node: str | None = None) -> float:
    if task.gpu >= 1:
        return float(task.gpu)
    if task.gpu > 0:
        return float(task.gpu) * task.fraction_device_count
    if task.gpu_memory_mib > 0:
        if node is not None and node in nodes:
            mem = nodes[node].gpu_memory_mib
        else:
            mem = max((n.gpu_memory_mib for n in nodes.values() if n.gpus), default=0.0)
        return task.gpu_memory_mib / mem * task.fraction_device_count if mem else 0.0
    return 0.0


def leaf_queues(queues: Sequence[Queue]) -> list[str]:
    parents = {q.parent for q in queues if q.parent}
    return [q.name for q in queues if q.name not in parents]


def simulate(
    snapshot: Snapshot,
    arrivals: Sequence[Arrival] = (),
    step_s: float = 10.0,
    *,
    config: Config | None = None,
    durations: Mapping[str, float] | None = None,
    until_s: float | None = None,
    max_cycles: int = 1_000_000,
    fast_forward: bool = True,
    should_stop: Callable[[], bool] | None = None,
) -> SimResult:
    """Run cycles every ``step_s`` simulated seconds from t = 0.

    ``snapshot`` gives the nodes, the queue tree and the jobs already there at
    t = 0 (running or pending). ``durations`` gives, by job name, how long each
    of those still runs (running jobs) or will run (pending ones); a job not
    named there never finishes. ``arrivals`` are jobs submitted later.

    The run stops at ``until_s``, after ``max_cycles``, or once nothing more
    can happen (no arrival to come, nothing pending, nothing finishing). With
    ``fast_forward`` a quiet cluster (the last cycle decided nothing) jumps to
    the next arrival or completion instead of stepping through idle cycles;
    it is not done when the outcome may depend on time alone (min-runtime
    protection, time-based fair share).

    ``should_stop`` is asked before every cycle (e.g. a wall-clock budget); when it says
    yes the run ends there with ``stopped`` set, and what it found so far is exact."""
    if step_s <= 0:
        raise ValueError("step_s must be positive")
    base = config or Config()
    start = base.now if base.now else datetime(2026, 1, 1, tzinfo=UTC)
    durations = durations or {}
    nodes = {n.name: n for n in snapshot.nodes}
    capacity = float(sum(n.gpus for n in snapshot.nodes if not n.unschedulable))
    leaves = leaf_queues(snapshot.queues)
    time_dependent = (
        base.usage_enabled
        or any(
            (q.reclaim_min_runtime_s or 0) > 0 or (q.preempt_min_runtime_s or 0) > 0 for q in snapshot.queues
        )
        or any(getattr(j, "preemption_delay_s", None) for j in snapshot.jobs)
    )

    live: dict[str, _Live] = {}
    records: dict[str, JobRecord] = {}
    alloc = _Counter()
    alloc.add(0.0, 0.0)
    evictions: list[EvictionRecord] = []

    def add_job(job: Job, rec: JobRecord) -> None:
        if job.name in records:
            raise ValueError(f"duplicate job name {job.name!r}")
        states = [_TaskState(t, _task_gpu(t, nodes, t.node)) for t in job.tasks]
        records[job.name] = rec
        live[job.name] = _Live(job, rec, states)

    for job in snapshot.jobs:
        dur = float(durations.get(job.name, INF))
        rec = JobRecord(job.name, job.queue, -job.created_s, dur, 0.0, len(job.tasks), initial=True)
        add_job(job, rec)
        lv = live[job.name]
        rec.gpu = round(sum(ts.gpu for ts in lv.tasks), 6)
        for ts in lv.tasks:
            if ts.task.state == TaskState.RUNNING and ts.task.node in nodes:
                ts.running, ts.node, ts.devices, ts.since = True, ts.task.node, ts.task.gpu_devices, 0.0
                lv.running_tasks += 1
                alloc.add(0.0, ts.gpu)
        if lv.running_tasks:
            rec.start_s = rec.first_start_s = -(job.last_start_s or 0.0)
            lv.end_at = dur
            lv.last_start_offset = job.last_start_s or 0.0

    order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i].submit_s, i))
    pending_arrivals = [arrivals[i] for i in order]
    names = [arrivals[i].name or f"job-{i:05d}" for i in order]
    next_arrival = 0

    samples: list[Sample] = []
    t = 0.0
    cycles = engine_cycles = double_booked = 0
    engine_seconds = 0.0
    last_result: CycleResult | None = None
    dirty = True
    stopped = False

    def stop_job(lv: _Live, at: float) -> None:
        for ts in lv.tasks:
            if ts.running:
                lv.record.gpu_seconds += ts.gpu * (at - ts.since)
                alloc.add(at, -ts.gpu)
                ts.running, ts.node, ts.devices = False, None, ()
        lv.running_tasks = 0
        lv.record.start_s = None
        lv.end_at = INF

    while cycles < max_cycles:
        if until_s is not None and t > until_s:
            break
        if should_stop is not None and cycles and should_stop():
            stopped = True
            break
        # 1. completions up to now, at their exact time
        done = sorted((lv.end_at, name) for name, lv in live.items() if lv.end_at <= t)
        for end_at, name in done:
            lv = live.pop(name)
            stop_job(lv, end_at)
            lv.record.end_s = end_at
            dirty = True
        # 2. arrivals up to now
        while next_arrival < len(pending_arrivals) and pending_arrivals[next_arrival].submit_s <= t:
            a = pending_arrivals[next_arrival]
            name = names[next_arrival]
            job = arrival_job(a, name)
            add_job(
                job, JobRecord(name, a.queue, a.submit_s, a.duration_s, round(a.gpu * a.tasks, 6), a.tasks)
            )
            next_arrival += 1
            dirty = True
        # 3. one cycle (skipped when nothing changed since a cycle that decided nothing)
        cycles += 1
        if dirty or time_dependent or last_result is None:
            snap = _snapshot(snapshot, live, t)
            cfg = dataclasses.replace(base, now=start + timedelta(seconds=t))
            t0 = time.perf_counter()
            result = run_cycle(snap, cfg)
            engine_seconds += time.perf_counter() - t0
            engine_cycles += 1
            if double_booked_gpus(snap, result):
                double_booked += 1
            decisions = _apply(result, live, t, alloc, evictions)
            last_result = result
            dirty = decisions > 0
        else:
            result, decisions = last_result, 0
        samples.append(_sample(t, result, live, leaves, alloc.value, decisions))
        # 4. the next cycle time
        future_arrival = (
            pending_arrivals[next_arrival].submit_s if next_arrival < len(pending_arrivals) else INF
        )
        future_end = min((lv.end_at for lv in live.values()), default=INF)
        anything_pending = any(lv.running_tasks < len(lv.tasks) for lv in live.values())
        nxt = t + step_s
        if not dirty and not time_dependent:
            if math.isinf(future_arrival) and math.isinf(future_end):
                break  # nothing will ever change
            if fast_forward or not anything_pending:
                event = min(future_arrival, future_end)
                nxt = max(nxt, math.ceil(event / step_s) * step_s)
        if not anything_pending and math.isinf(future_arrival) and math.isinf(future_end):
            break
        if until_s is not None and nxt > until_s:
            t = max(t, until_s)
            break
        t = nxt

    end = t
    for end_at, name in sorted((lv.end_at, name) for name, lv in live.items() if lv.end_at <= end):
        lv = live.pop(name)
        stop_job(lv, end_at)
        lv.record.end_s = end_at
    for lv in live.values():  # still running at the end: count their GPU time so far
        for ts in lv.tasks:
            if ts.running:
                lv.record.gpu_seconds += ts.gpu * (end - ts.since)
    return SimResult(
        jobs=records,
        samples=samples,
        allocation=alloc.points,
        evictions=evictions,
        cycles=cycles,
        engine_cycles=engine_cycles,
        end_s=end,
        engine_seconds=engine_seconds,
        capacity_gpu=capacity,
        leaf_queues=leaves,
        double_booked_cycles=double_booked,
        stopped=stopped,
    )


def _snapshot(base: Snapshot, live: Mapping[str, _Live], t: float) -> Snapshot:
    jobs: list[Job] = []
    for lv in live.values():
        rec = lv.record
        tasks = [
            dataclasses.replace(ts.task, state=TaskState.RUNNING, node=ts.node, gpu_devices=ts.devices)
            if ts.running
            else dataclasses.replace(ts.task, state=TaskState.PENDING, node=None, gpu_devices=())
            for ts in lv.tasks
        ]
        last_start = None if rec.start_s is None else max(0.0, t - rec.start_s)
        changes: dict[str, Any] = {
            "created_s": max(0.0, t - rec.submit_s),
            "last_start_s": last_start,
            "tasks": tasks,
        }
        if lv.last_eviction_at is not None and _HAS_LAST_EVICTION:
            changes["last_eviction_s"] = max(0.0, t - lv.last_eviction_at)
        jobs.append(dataclasses.replace(lv.template, **changes))
    return Snapshot(nodes=base.nodes, queues=base.queues, jobs=jobs)


def _apply(
    result: CycleResult,
    live: Mapping[str, _Live],
    t: float,
    alloc: _Counter,
    evictions: list[EvictionRecord],
) -> int:
    """Apply a cycle's decisions; return how many task decisions it made."""
    decisions = 0
    evicted_jobs: dict[str, list[tuple[str, str]]] = {}
    # Eviction records of the engine (action names), when it reports them.
    actions = {getattr(e, "task", ""): getattr(e, "action", "") for e in getattr(result, "evictions", [])}
    for lv in live.values():
        for ts in lv.tasks:
            out = result.tasks.get(ts.task.name)
            if out is None:
                continue
            if ts.running and out.status in (TaskState.RELEASING, TaskState.PIPELINED):
                reason = (
                    actions.get(ts.task.name)
                    or ("consolidation" if out.status == TaskState.PIPELINED else "")
                    or out.reason
                    or "evicted"
                )
                evicted_jobs.setdefault(lv.template.name, []).append((ts.task.name, reason))
            elif not ts.running and out.status == TaskState.ALLOCATED and out.node:
                ts.running, ts.node, ts.devices, ts.since = True, out.node, tuple(out.gpu_devices), t
                lv.running_tasks += 1
                alloc.add(t, ts.gpu)
                decisions += 1
                rec = lv.record
                if rec.start_s is None:
                    rec.start_s = t
                    lv.end_at = t + rec.duration_s
                    if rec.first_start_s is None:
                        rec.first_start_s = t
            elif out.status == TaskState.PIPELINED:
                decisions += 1  # a plan; the task binds in a later cycle
    for name, tasks in evicted_jobs.items():
        lv = live[name]
        for task, reason in tasks:
            evictions.append(EvictionRecord(t, task, name, lv.template.queue, reason))
        lv.record.evicted_tasks += len(tasks)
        lv.record.restarts += 1
        lv.last_eviction_at = t
        decisions += len(tasks)
        # the whole job stops and starts again from scratch later
        for ts in lv.tasks:
            if ts.running:
                lv.record.gpu_seconds += ts.gpu * (t - ts.since)
                alloc.add(t, -ts.gpu)
                ts.running, ts.node, ts.devices = False, None, ()
        lv.running_tasks = 0
        lv.record.start_s = None
        lv.end_at = INF
    return decisions


def _sample(
    t: float,
    result: CycleResult,
    live: Mapping[str, _Live],
    leaves: Sequence[str],
    total: float,
    decisions: int,
) -> Sample:
    q_alloc = dict.fromkeys(leaves, 0.0)
    q_pend = dict.fromkeys(leaves, 0)
    running = pending = 0
    for lv in live.values():
        q = lv.template.queue
        if lv.running_tasks:
            running += 1
        if lv.running_tasks < len(lv.tasks):
            pending += 1
        for ts in lv.tasks:
            if ts.running:
                q_alloc[q] = q_alloc.get(q, 0.0) + ts.gpu
            else:
                q_pend[q] = q_pend.get(q, 0) + 1
    fs = {q: result.queues[q].fair_share.get("gpu", 0.0) if q in result.queues else 0.0 for q in leaves}
    return Sample(
        t,
        round(total, 6),
        running,
        pending,
        {q: round(v, 6) for q, v in q_alloc.items()},
        fs,
        q_pend,
        decisions,
    )


def with_quotas(snapshot: Snapshot, gpu_quotas: Mapping[str, float]) -> Snapshot:
    """A copy of the snapshot whose named queues have these GPU quotas (for what-if previews)."""
    unknown = set(gpu_quotas) - {q.name for q in snapshot.queues}
    if unknown:
        raise ValueError(f"unknown queue {sorted(unknown)[0]!r}")
    queues = []
    for q in snapshot.queues:
        if q.name in gpu_quotas:
            res = dict(q.resources)
            res["gpu"] = dataclasses.replace(q.res("gpu"), quota=float(gpu_quotas[q.name]))
            q = dataclasses.replace(q, resources=res)
        queues.append(q)
    return Snapshot(nodes=snapshot.nodes, queues=queues, jobs=snapshot.jobs)
