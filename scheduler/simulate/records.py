"""What a simulation takes and gives: the jobs that arrive, and the result (each job's record,
the samples after every cycle, the evictions) with its reports (waits, utilisation, fairness)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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
    task: str  # the task's key
    job: str  # the job's key
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
