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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.cycle import run_cycle
from scheduler.model import Config, Job, Node, Queue, Snapshot, Task, TaskState
from scheduler.overcommit import double_booked_gpus
from scheduler.result import CycleResult
from scheduler.simulate.records import Arrival, EvictionRecord, JobRecord, Sample, SimResult

INF = math.inf
# Newer engines know when a job last had pods evicted (preemption delay); older ones do not.
_HAS_LAST_EVICTION = "last_eviction_s" in {f.name for f in dataclasses.fields(Job)}

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
    t = 0 (running or pending). ``durations`` gives, by job key (``Job.key``; a
    scenario's is its name), how long each of those still runs (running jobs) or
    will run (pending ones); a job not named there never finishes. ``arrivals``
    are jobs submitted later. ``SimResult.jobs`` is by job key too.

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
    run = _Run(snapshot, arrivals, step_s, config or Config(), durations or {})
    t = 0.0
    while run.cycles < max_cycles:
        if until_s is not None and t > until_s:
            break
        if should_stop is not None and run.cycles and should_stop():
            run.stopped = True
            break
        run.complete(t)
        run.arrive(t)
        run.cycle(t)
        nxt = run.next_time(t, fast_forward)
        if nxt is None:
            break
        if until_s is not None and nxt > until_s:
            t = max(t, until_s)
            break
        t = nxt
    return run.finish(t)


class _Run:
    """One simulation's state between cycles, and its steps: completions, arrivals, one
    engine cycle, the next cycle time, and the closing accounts."""

    def __init__(
        self,
        snapshot: Snapshot,
        arrivals: Sequence[Arrival],
        step_s: float,
        base: Config,
        durations: Mapping[str, float],
    ) -> None:
        self.snapshot = snapshot
        self.step_s = step_s
        self.base = base
        self.start = base.now if base.now else datetime(2026, 1, 1, tzinfo=UTC)
        self.nodes = {n.name: n for n in snapshot.nodes}
        self.capacity = float(sum(n.gpus for n in snapshot.nodes if not n.unschedulable))
        self.leaves = leaf_queues(snapshot.queues)
        # An outcome that may change with time alone (min-runtime protection, time-based fair
        # share, preemption delay) rules out skipping cycles.
        self.time_dependent = (
            base.usage_enabled
            or any(
                (q.reclaim_min_runtime_s or 0) > 0 or (q.preempt_min_runtime_s or 0) > 0
                for q in snapshot.queues
            )
            or any(getattr(j, "preemption_delay_s", None) for j in snapshot.jobs)
        )
        self.live: dict[str, _Live] = {}
        self.records: dict[str, JobRecord] = {}
        self.alloc = _Counter()
        self.alloc.add(0.0, 0.0)
        self.evictions: list[EvictionRecord] = []
        self.samples: list[Sample] = []
        self.cycles = self.engine_cycles = self.double_booked = 0
        self.engine_seconds = 0.0
        self.last_result: CycleResult | None = None
        self.dirty = True  # something changed since the last engine cycle
        self.stopped = False
        for job in snapshot.jobs:
            self._add_initial(job, float(durations.get(job.key, INF)))
        order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i].submit_s, i))
        self.pending_arrivals = [arrivals[i] for i in order]
        self.names = [arrivals[i].name or f"job-{i:05d}" for i in order]
        self.next_arrival = 0

    def _add_job(self, job: Job, rec: JobRecord) -> None:
        if job.key in self.records:
            raise ValueError(f"duplicate job key {job.key!r}")
        states = [_TaskState(t, _task_gpu(t, self.nodes, t.node)) for t in job.tasks]
        self.records[job.key] = rec
        self.live[job.key] = _Live(job, rec, states)

    def _add_initial(self, job: Job, dur: float) -> None:
        """A job of the starting snapshot, its running tasks running since t = 0."""
        rec = JobRecord(job.name, job.queue, -job.created_s, dur, 0.0, len(job.tasks), initial=True)
        self._add_job(job, rec)
        lv = self.live[job.key]
        rec.gpu = round(sum(ts.gpu for ts in lv.tasks), 6)
        for ts in lv.tasks:
            if ts.task.state == TaskState.RUNNING and ts.task.node in self.nodes:
                ts.running, ts.node, ts.devices, ts.since = True, ts.task.node, ts.task.gpu_devices, 0.0
                lv.running_tasks += 1
                self.alloc.add(0.0, ts.gpu)
        if lv.running_tasks:
            rec.start_s = rec.first_start_s = -(job.last_start_s or 0.0)
            lv.end_at = dur
            lv.last_start_offset = job.last_start_s or 0.0

    def _stop_job(self, lv: _Live, at: float) -> None:
        for ts in lv.tasks:
            if ts.running:
                lv.record.gpu_seconds += ts.gpu * (at - ts.since)
                self.alloc.add(at, -ts.gpu)
                ts.running, ts.node, ts.devices = False, None, ()
        lv.running_tasks = 0
        lv.record.start_s = None
        lv.end_at = INF

    def complete(self, t: float) -> None:
        """Step 1: the jobs that finished up to ``t``, each at its exact time."""
        live = self.live
        done = sorted((lv.end_at, name) for name, lv in live.items() if lv.end_at <= t)
        for end_at, name in done:
            lv = live.pop(name)
            self._stop_job(lv, end_at)
            lv.record.end_s = end_at
            self.dirty = True

    def arrive(self, t: float) -> None:
        """Step 2: the arrivals submitted up to ``t``."""
        pending = self.pending_arrivals
        while self.next_arrival < len(pending) and pending[self.next_arrival].submit_s <= t:
            a = pending[self.next_arrival]
            name = self.names[self.next_arrival]
            job = arrival_job(a, name)
            self._add_job(
                job, JobRecord(name, a.queue, a.submit_s, a.duration_s, round(a.gpu * a.tasks, 6), a.tasks)
            )
            self.next_arrival += 1
            self.dirty = True

    def cycle(self, t: float) -> None:
        """Step 3: one scheduling cycle at ``t`` and its sample (the engine is skipped when
        nothing changed since a cycle that decided nothing)."""
        self.cycles += 1
        if self.dirty or self.time_dependent or self.last_result is None:
            snap = _snapshot(self.snapshot, self.live, t)
            cfg = dataclasses.replace(self.base, now=self.start + timedelta(seconds=t))
            t0 = time.perf_counter()
            result = run_cycle(snap, cfg)
            self.engine_seconds += time.perf_counter() - t0
            self.engine_cycles += 1
            if double_booked_gpus(snap, result):
                self.double_booked += 1
            decisions = _apply(result, self.live, t, self.alloc, self.evictions)
            self.last_result = result
            self.dirty = decisions > 0
        else:
            result, decisions = self.last_result, 0
        self.samples.append(_sample(t, result, self.live, self.leaves, self.alloc.value, decisions))

    def next_time(self, t: float, fast_forward: bool) -> float | None:
        """Step 4: the next cycle time, or None once nothing more can happen."""
        step_s = self.step_s
        pending = self.pending_arrivals
        future_arrival = pending[self.next_arrival].submit_s if self.next_arrival < len(pending) else INF
        future_end = min((lv.end_at for lv in self.live.values()), default=INF)
        anything_pending = any(lv.running_tasks < len(lv.tasks) for lv in self.live.values())
        nxt = t + step_s
        if not self.dirty and not self.time_dependent:
            if math.isinf(future_arrival) and math.isinf(future_end):
                return None  # nothing will ever change
            if fast_forward or not anything_pending:
                event = min(future_arrival, future_end)
                nxt = max(nxt, math.ceil(event / step_s) * step_s)
        if not anything_pending and math.isinf(future_arrival) and math.isinf(future_end):
            return None
        return nxt

    def finish(self, end: float) -> SimResult:
        """Close the accounts at ``end``: jobs finished by then, GPU time of those still running."""
        live = self.live
        for end_at, name in sorted((lv.end_at, name) for name, lv in live.items() if lv.end_at <= end):
            lv = live.pop(name)
            self._stop_job(lv, end_at)
            lv.record.end_s = end_at
        for lv in live.values():  # still running at the end: count their GPU time so far
            for ts in lv.tasks:
                if ts.running:
                    lv.record.gpu_seconds += ts.gpu * (end - ts.since)
        return SimResult(
            jobs=self.records,
            samples=self.samples,
            allocation=self.alloc.points,
            evictions=self.evictions,
            cycles=self.cycles,
            engine_cycles=self.engine_cycles,
            end_s=end,
            engine_seconds=self.engine_seconds,
            capacity_gpu=self.capacity,
            leaf_queues=self.leaves,
            double_booked_cycles=self.double_booked,
            stopped=self.stopped,
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
            out = result.tasks.get(ts.task.key)
            if out is None:
                continue
            if ts.running and out.status in (TaskState.RELEASING, TaskState.PIPELINED):
                reason = (
                    actions.get(ts.task.key)
                    or ("consolidation" if out.status == TaskState.PIPELINED else "")
                    or out.text()
                    or "evicted"
                )
                evicted_jobs.setdefault(lv.template.key, []).append((ts.task.key, reason))
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
