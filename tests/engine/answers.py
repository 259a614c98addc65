"""A whole cycle's answer as comparable text, for the tests that hold a shortcut of the eviction
actions to the search it skips (alike preemptors, signatures, victim sums)."""

from __future__ import annotations

import json

from scheduler import Config, Snapshot, run_cycle

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")


def cycle_answer(snap: Snapshot) -> str:
    """Every outcome of one cycle with all actions, as sorted JSON (a budget no test reaches)."""
    result = run_cycle(snap, Config(actions=ACTIONS, action_time_budget_s=600.0))
    return json.dumps(result.to_json(), sort_keys=True, default=str)
