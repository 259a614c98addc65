"""KAI's multi-node scenario generator (``scheduler/actions/solvers/multi_node.py``;
``plugins/multinodegang/generator.go``, ``actions/common/solvers/sub_scenario_emitter.go``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.actions.solvers.multi_node import sub_scenarios
from scheduler.actions.solvers.scenario import Contribution
from scheduler.cycle import open_session
from scheduler.scenario import compare, load, parse, run

CASE = (
    Path(__file__).resolve().parent.parent
    / "scenarios"
    / "kai-diff"
    / "multi-node-generator-solves-gang.yaml"
)


def _running(name: str, node: str, gpu: float) -> dict[str, Any]:
    return {
        "name": name,
        "queue": "q",
        "task_defaults": {"gpu": gpu},
        "tasks": [{"name": f"{name}-0", "state": "Running", "node": node}],
    }


def test_sub_scenarios_take_the_cheapest_nodes_first_and_grow_by_doubling_steps() -> None:
    scenario = parse(
        {
            "name": "emitter",
            "nodes": [
                {"name": "n1", "gpus": 4},
                {"name": "n2", "gpus": 2},
                {"name": "n3", "gpus": 2},
                {"name": "n4", "gpus": 1},
                {"name": "n5", "gpus": 1},
            ],
            "queues": [{"name": "q"}],
            "jobs": [
                _running("v4", "n4", 1),  # n4 would free 1 GPU: below the 2-GPU task, never picked
                _running("v1", "n1", 4),
                _running("v2", "n2", 1),  # n2 frees 2: its victim's GPU and an idle one
                _running("v3", "n3", 2),
                _running("v5", "n5", 1),  # the same capacity as n4: dropped too
                {"name": "p", "queue": "q", "task_defaults": {"gpu": 2}, "tasks": [{"name": "p-0"}]},
            ],
        }
    )
    session = open_session(scenario.snapshot, scenario.config, "default")
    jobs = {j.name: j for j in scenario.snapshot.jobs}
    stream = [Contribution(jobs[n], list(jobs[n].tasks)) for n in ("v4", "v1", "v2", "v3", "v5")]
    feasible = list(session.nodes.values())
    got = [
        [c.job.name for c in picked]
        for picked in sub_scenarios(session, stream, {}, feasible, list(jobs["p"].tasks))
    ]
    # Capacities n2 = 2, n3 = 2 (tie: n2's victim comes first in the stream), n1 = 4; the 2 GPUs
    # asked are covered by one node, so k = 1, then 2, then 4 clamped to the 3 candidates.
    assert got == [["v2"], ["v2", "v3"], ["v1", "v2", "v3"]]


def test_free_gpus_on_nodes_without_victims_lower_the_first_k() -> None:
    scenario = parse(
        {
            "name": "baseline",
            "nodes": [{"name": "n1", "gpus": 2}, {"name": "n2", "gpus": 2}, {"name": "n3", "gpus": 2}],
            "queues": [{"name": "q"}],
            "jobs": [
                _running("v1", "n1", 2),
                _running("v2", "n2", 2),
                {"name": "p", "queue": "q", "task_defaults": {"gpu": 2}, "tasks": [{"name": "p-0"}]},
            ],
        }
    )
    session = open_session(scenario.snapshot, scenario.config, "default")
    jobs = {j.name: j for j in scenario.snapshot.jobs}
    stream = [Contribution(jobs[n], list(jobs[n].tasks)) for n in ("v1", "v2")]
    feasible = list(session.nodes.values())
    got = [
        [c.job.name for c in picked]
        for picked in sub_scenarios(session, stream, {}, feasible, list(jobs["p"].tasks))
    ]
    # n3's 2 idle GPUs cover the step: k starts at 0 (no victim), then 1, then 2.
    assert got == [[], ["v1"], ["v1", "v2"]]


def test_the_pinned_case_is_decided_by_the_multi_node_generator() -> None:
    scenario = load(CASE)
    assert compare(scenario, run(scenario)) == []
    scenario = load(CASE)
    scenario.config.node_local_max_stream = 0  # no KAI generator: the greedy + prefix search
    assert compare(scenario, run(scenario)) != []
