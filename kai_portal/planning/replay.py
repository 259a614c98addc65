"""Replay a window of history through the engine twice: today's settings, then the changed ones.

Both replays start from an empty cluster at the window's start (jobs submitted before the window
are not in it), with today's nodes and queue tree, and take the same arrivals
(``history.window_jobs``). The changed one has some queues' GPU quota, limit and over-quota
weight replaced, and/or extra nodes in a pool. Each is ``scheduler.simulate`` (through the
scheduling adapter) with a cycle every ``step_seconds`` simulated seconds; it runs until every job
of the window has finished or ``until_s`` (the window and a day after it) is reached.

What each replay reports, per leaf queue and per team (a team's queues together):
* waits: seconds from submit to first start, median and p95 (nearest rank), of the jobs that
  started; jobs that never started by the end are counted apart;
* GPU-hours served: GPU x hours held by the jobs' pods, runs lost to evictions included;
* utilisation: those GPU-hours over the capacity of the queue's pool during the replay;
* evictions: pods evicted (reclaim, preempt, consolidation, stale gang).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from kai_portal.planning.history import WindowJobs, window_jobs
from kai_portal.queues.models import Queue
from kai_portal.scheduling import engine
from kai_portal.scheduling.snapshot import build_snapshot

# One scheduling cycle per simulated minute (waits exact to the minute), fewer on long windows so
# that a replay stays near MAX_CYCLES cycles: a queue with a min-runtime makes the simulator run
# every cycle, not only those where something changes.
STEP_S = 60.0
MAX_CYCLES = 3000
DRAIN = timedelta(days=1)
# Wall-clock limit of one replay in the worker; a replay stopped by it says so on the page.
REPLAY_BUDGET_S = 240.0
POOL_LABEL = "kai.scheduler/node-pool"

Progress = Callable[[int, str], None]


@dataclasses.dataclass(frozen=True)
class ExtraNodes:
    count: int
    gpus_per_node: int
    gpu_model: str
    gpu_memory_mib: int
    pool: str


@dataclasses.dataclass(frozen=True)
class PlanInputs:
    start: datetime
    end: datetime
    # queue name -> {"gpu_quota" | "gpu_limit" | "gpu_over_quota_weight": value} (changed only)
    queue_changes: Mapping[str, Mapping[str, float]]
    extra_nodes: ExtraNodes | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlanInputs:
        extra = data.get("extra_nodes")
        return cls(
            start=datetime.fromisoformat(data["start"]),
            end=datetime.fromisoformat(data["end"]),
            queue_changes={q: dict(c) for q, c in data.get("queue_changes", {}).items()},
            extra_nodes=ExtraNodes(**extra) if extra else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "queue_changes": {q: dict(c) for q, c in self.queue_changes.items()},
            "extra_nodes": dataclasses.asdict(self.extra_nodes) if self.extra_nodes else None,
        }


@dataclasses.dataclass
class Setup:
    """What both replays take: the two snapshots (no jobs), the arrivals and the engine config."""

    today: engine.Snapshot
    changed: engine.Snapshot
    jobs: WindowJobs
    config: engine.Config
    until_s: float
    step_s: float


def setup(inputs: PlanInputs, now: datetime) -> Setup:
    base = build_snapshot(now).snapshot
    # No historical usage (none is known at the window's start) and no left-out backlog.
    queues = [dataclasses.replace(q, historical_usage={}, unlisted=[]) for q in base.queues]
    today = engine.Snapshot(nodes=list(base.nodes), queues=queues, jobs=[])
    changed = engine.Snapshot(
        nodes=[*base.nodes, *_extra_nodes(inputs.extra_nodes, base.nodes)],
        queues=[_changed_queue(q, inputs.queue_changes.get(q.name)) for q in queues],
        jobs=[],
    )
    jobs = window_jobs(inputs.start, inputs.end, now, _device_memory(today))
    config = engine.Config(
        now=inputs.start,
        usage_window_hours=settings.FAIRSHARE_USAGE_WINDOW_HOURS,
        usage_half_life_hours=settings.FAIRSHARE_USAGE_HALF_LIFE_HOURS,
        usage_k=settings.FAIRSHARE_USAGE_K,
    )
    return Setup(
        today,
        changed,
        jobs,
        config,
        until_seconds(inputs.start, inputs.end),
        step_seconds(inputs.start, inputs.end),
    )


def until_seconds(start: datetime, end: datetime) -> float:
    """The replay's end: the window and a day after it for the last jobs to start and finish."""
    return (end - start + DRAIN).total_seconds()


def step_seconds(start: datetime, end: datetime) -> float:
    """Simulated seconds between cycles: a minute, or whole minutes enough for ``MAX_CYCLES``."""
    return max(STEP_S, math.ceil(until_seconds(start, end) / MAX_CYCLES / 60) * 60)


def _changed_queue(q: engine.Queue, changes: Mapping[str, float] | None) -> engine.Queue:
    if not changes:
        return q
    gpu = q.res("gpu")
    new = dataclasses.replace(
        gpu,
        quota=float(changes.get("gpu_quota", gpu.quota)),
        limit=float(changes.get("gpu_limit", gpu.limit)),
        over_quota_weight=float(changes.get("gpu_over_quota_weight", gpu.over_quota_weight)),
    )
    return dataclasses.replace(q, resources={**q.resources, "gpu": new})


def _extra_nodes(extra: ExtraNodes | None, nodes: Sequence[engine.Node]) -> list[engine.Node]:
    if extra is None:
        return []
    # CPU and memory as the pool's largest node (the replay's jobs ask for GPUs only).
    same_pool = [n for n in nodes if n.pool == extra.pool] or list(nodes)
    cpu = max((n.cpu_millis for n in same_pool), default=1_000_000.0)
    memory = max((n.memory_mib for n in same_pool), default=1_048_576.0)
    return [
        engine.Node(
            name=f"planned-{extra.pool}-{i:03d}",
            gpus=extra.gpus_per_node,
            gpu_memory_mib=float(extra.gpu_memory_mib),
            cpu_millis=cpu,
            memory_mib=memory,
            pool=extra.pool,
            labels={POOL_LABEL: extra.pool, "nvidia.com/gpu.product": extra.gpu_model},
        )
        for i in range(1, extra.count + 1)
    ]


def _device_memory(snapshot: engine.Snapshot) -> dict[str, float]:
    """One GPU's memory in each queue's pool (the smallest device there), by queue name."""
    pools = engine.queue_pools(snapshot.queues)
    memory: dict[str, float] = {}
    for n in snapshot.nodes:
        if n.gpus:
            memory[n.pool] = min(memory.get(n.pool, n.gpu_memory_mib), n.gpu_memory_mib)
    return {q: memory[p] for q, p in pools.items() if p in memory}


def run(
    setup: Setup, snapshot: engine.Snapshot, progress: Progress, share: tuple[int, int]
) -> engine.SimResult:
    """One replay; ``progress(percent, stage)`` is told how far it got, within ``share`` percent."""
    low, high = share
    most = max(1, int(setup.until_s // setup.step_s) + 1)
    started = time.monotonic()
    cycles = 0
    last_report = 0.0

    def should_stop() -> bool:
        nonlocal cycles, last_report
        cycles += 1
        now = time.monotonic()
        if now - last_report >= 1.0:
            last_report = now
            progress(low + (high - low) * min(cycles, most) // most, f"cycle {cycles} of at most {most}")
        return now - started > REPLAY_BUDGET_S

    return engine.simulate(
        copy.deepcopy(snapshot),
        setup.jobs.arrivals,
        setup.step_s,
        config=setup.config,
        until_s=setup.until_s,
        should_stop=should_stop,
    )


# --- summaries ----------------------------------------------------------------------------------


def summarise(
    result: engine.SimResult, snapshot: engine.Snapshot, teams: Mapping[str, str]
) -> dict[str, Any]:
    """Per queue and per team (``teams``: queue name -> team name), and the cluster's totals."""
    pools = engine.queue_pools(snapshot.queues)
    capacity: dict[str, float] = {}
    for n in snapshot.nodes:
        if not n.unschedulable:
            capacity[n.pool] = capacity.get(n.pool, 0.0) + max(0, n.gpus - n.external.gpus)
    span_h = result.end_s / 3600.0
    evictions: dict[str, int] = {}
    for e in result.evictions:
        evictions[e.queue] = evictions.get(e.queue, 0) + 1
    waits = result.wait_stats()
    queues: dict[str, dict[str, Any]] = {}
    for name, stats in waits.items():
        gpu_s = sum(j.gpu_seconds for j in result.jobs.values() if j.queue == name)
        pool_cap = capacity.get(pools.get(name, ""), 0.0)
        queues[name] = {
            "team": teams.get(name, ""),
            "jobs": stats["jobs"],
            "started": stats["started"],
            "never_started": stats["never_started"],
            "median_wait_s": stats["median_s"],
            "p95_wait_s": stats["p95_s"],
            "gpu_hours": round(gpu_s / 3600.0, 2),
            "utilisation": round(gpu_s / 3600.0 / (pool_cap * span_h), 4) if pool_cap and span_h else 0.0,
            "evictions": evictions.get(name, 0),
        }
    by_team: dict[str, list[Any]] = {}
    for j in result.jobs.values():
        by_team.setdefault(teams.get(j.queue, "") or "(no team)", []).append(j)
    team_rows: dict[str, dict[str, Any]] = {}
    for team, jobs in sorted(by_team.items()):
        started = sorted(w for j in jobs if (w := j.wait_s) is not None)
        team_queues = {j.queue for j in jobs}
        team_rows[team] = {
            "jobs": len(jobs),
            "started": len(started),
            "never_started": len(jobs) - len(started),
            "median_wait_s": nearest_rank(started, 50),
            "p95_wait_s": nearest_rank(started, 95),
            "gpu_hours": round(sum(j.gpu_seconds for j in jobs) / 3600.0, 2),
            "evictions": sum(evictions.get(q, 0) for q in team_queues),
        }
    return {
        "queues": queues,
        "teams": team_rows,
        "cluster": {
            "capacity_gpu": result.capacity_gpu,
            "utilisation": round(result.utilisation(), 4),
            "gpu_hours": round(result.gpu_seconds_run() / 3600.0, 2),
            "evictions": len(result.evictions),
            "end_s": result.end_s,
            "cycles": result.cycles,
            "stopped": result.stopped,
        },
    }


def nearest_rank(sorted_values: Sequence[float], pct: float) -> float | None:
    """The simulator's percentile (nearest rank) of an already sorted list; None when empty."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(pct / 100 * len(sorted_values)) - 1))
    return round(float(sorted_values[k]), 3)


def team_names() -> dict[str, str]:
    return {name: team or "" for name, team in Queue.objects.values_list("name", "team__name")}


def replay(inputs: PlanInputs, now: datetime, progress: Progress) -> dict[str, Any]:
    """Both replays and their summaries, as the plan's stored outputs."""
    progress(2, "reading the window's jobs")
    s = setup(inputs, now)
    teams = team_names()
    progress(5, f"replaying {len(s.jobs.arrivals)} jobs with today's settings")
    today = run(s, s.today, lambda p, t: progress(p, f"today's settings: {t}"), (5, 50))
    progress(50, f"replaying {len(s.jobs.arrivals)} jobs with the changes")
    changed = run(s, s.changed, lambda p, t: progress(p, f"changed settings: {t}"), (50, 97))
    return {
        "jobs": len(s.jobs.arrivals),
        "left_out": s.jobs.left_out,
        "step_s": s.step_s,
        "until_s": s.until_s,
        "today": summarise(today, s.today, teams),
        "changed": summarise(changed, s.changed, teams),
    }
