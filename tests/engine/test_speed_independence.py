"""Decisions do not depend on the speed of the machine (issue 28): the eviction actions' search is
bounded by work (``Config.action_work_budget``), and the wall-clock limit is a fault stop only.

The same workload runs under a fast fake clock (time stands still) and a slow one (the run takes
250 s: beyond the 60 s after which each action's search used to stop, which changes this answer,
and within the 300 s fault stop): the answers must be identical, the work budget must be what
ended the search, and no action may have hit the fault stop."""

from __future__ import annotations

import json

import pytest

from scheduler import Config, run_cycle
from scheduler.actions.solvers import budget, loop
from scheduler.bench.workloads import stress_mixed_snapshot

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")


def _run(monkeypatch: pytest.MonkeyPatch, config: Config, step_s: float) -> tuple[str, dict[str, int], int]:
    """One cycle with a clock that moves ``step_s`` per reading: (answer, counters, readings)."""
    now = [1000.0]

    def clock() -> float:
        now[0] += step_s
        return now[0]

    with monkeypatch.context() as m:
        # Both readers of the clock: the action's deadline (``loop``) and its checks (``budget``).
        # Patching the checks alone left the deadline on the real monotonic clock, so the test
        # depended on the machine's uptime.
        m.setattr(budget, "now_s", clock)
        m.setattr(loop, "now_s", clock)
        result = run_cycle(stress_mixed_snapshot(n_nodes=40, running=300, pending=120), config)
    readings = round((now[0] - 1000.0) / step_s) if step_s else 0
    answer = json.dumps(result.to_json(), sort_keys=True, default=str)
    return answer, result.counters, readings


def _readings(monkeypatch: pytest.MonkeyPatch, config: Config) -> int:
    return _run(monkeypatch, config, 1e-9)[2]


def test_a_slow_machine_decides_as_a_fast_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # A budget small enough that the small mixed workload spends it (the full-size workload
    # spends the default one the same way).
    config = Config(actions=ACTIONS, action_work_budget=20_000)
    fast, fast_counters, _ = _run(monkeypatch, config, 0.0)
    n = _readings(monkeypatch, config)
    assert n > 0
    slow, slow_counters, _ = _run(monkeypatch, config, 250.0 / n)

    assert fast_counters["actions_out_of_work"] >= 1, "the work budget ends the search"
    assert fast_counters["actions_out_of_time"] == slow_counters["actions_out_of_time"] == 0
    assert slow == fast


def test_the_wall_clock_limit_is_a_reported_fault_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that jumps past the fault stop on every reading ends the search at once, and the
    cycle says so (the answer then depends on speed, which is why it is reported)."""
    config = Config(actions=ACTIONS)
    _, counters, _ = _run(monkeypatch, config, config.action_time_budget_s + 1.0)
    assert counters["actions_out_of_time"] >= 1
    assert counters["actions_out_of_work"] == 0
