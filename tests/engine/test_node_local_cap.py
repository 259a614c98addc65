"""``Config.node_local_max_stream``: how long a victim stream may be for KAI's node-local scenario
generator to run first (docs/kai-agreement.md, deliberate differences)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.scenario import ScenarioError, compare, load, parse, run

CASE = (
    Path(__file__).resolve().parent.parent
    / "scenarios"
    / "kai-diff"
    / "victim-re-placed-through-node-order.yaml"
)


@pytest.mark.parametrize("cap", [None, 64])
def test_kai_node_local_generator_decides_the_pinned_case(cap: int | None) -> None:
    scenario = load(CASE)
    scenario.config.node_local_max_stream = cap
    assert compare(scenario, run(scenario)) == []


def test_without_the_node_local_generator_the_decision_differs() -> None:
    scenario = load(CASE)
    scenario.config.node_local_max_stream = 0  # every stream is longer: prefix search only
    assert compare(scenario, run(scenario)) != []


def test_the_cap_is_read_from_the_scenario_config() -> None:
    base = {"name": "cap", "nodes": [{"name": "n", "gpus": 1}], "queues": [{"name": "q"}], "jobs": []}
    assert parse({**base, "config": {}}).config.node_local_max_stream == 64
    assert parse({**base, "config": {"node_local_max_stream": None}}).config.node_local_max_stream is None
    assert parse({**base, "config": {"node_local_max_stream": 3}}).config.node_local_max_stream == 3
    for bad in (-1, 2.5, "all", True):
        with pytest.raises(ScenarioError, match="config.node_local_max_stream must be a whole number"):
            parse({**base, "config": {"node_local_max_stream": bad}})
