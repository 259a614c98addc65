"""Placement rules (scheduler/rules.py) and their scenario syntax."""

from __future__ import annotations

import pytest

from scheduler import Job, Node
from scheduler.model import MatchExpression, Taint, Toleration
from scheduler.rules import matches, static_reason, tolerates
from scheduler.scenario import ScenarioError, parse


@pytest.mark.parametrize(
    ("toleration", "taint", "ok"),
    [
        (Toleration("", "Exists"), Taint("any", "x", "NoExecute"), True),  # tolerates everything
        (Toleration("k", "Exists"), Taint("k", "v"), True),
        (Toleration("k", "Equal", "v"), Taint("k", "v"), True),
        (Toleration("k", "Equal", "w"), Taint("k", "v"), False),
        (Toleration("k", "Exists", effect="NoExecute"), Taint("k", "v", "NoSchedule"), False),
        (Toleration("other", "Exists"), Taint("k", "v"), False),
    ],
)
def test_tolerates(toleration: Toleration, taint: Taint, ok: bool) -> None:
    assert tolerates(toleration, taint) is ok


def test_match_operators() -> None:
    node = Node("n", labels={"mem": "80", "model": "a100"})
    assert matches(node, MatchExpression("model", "In", ("a100", "h100")))
    assert not matches(node, MatchExpression("model", "NotIn", ("a100",)))
    assert matches(node, MatchExpression("missing", "NotIn", ("a100",)))
    assert matches(node, MatchExpression("mem", "Gt", ("40",)))
    assert not matches(node, MatchExpression("model", "Gt", ("40",)))  # not an integer: no match
    assert matches(node, MatchExpression("mem", "Lt", ("81",)))
    assert matches(node, MatchExpression("kubernetes.io/hostname", "In", ("n",)))  # the node's name
    assert matches(node, MatchExpression("missing", "DoesNotExist"))


def test_first_untolerated_taint_is_the_reason() -> None:
    node = Node("n", taints=[Taint("a", "1", "PreferNoSchedule"), Taint("b", "2")])
    assert static_reason(node, Job("j", "q")) == "node(s) had untolerated taint {b: 2}"
    assert static_reason(node, Job("j", "q", tolerations=[Toleration("b", "Exists")])) is None


GT_X = {"key": "k", "operator": "Gt", "values": ["x"]}


def _scenario(job: dict[str, object], node: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "name": "x",
        "nodes": [{"name": "n0", "gpus": 1, **(node or {})}],
        "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "tasks": [{}], **job}],
    }


@pytest.mark.parametrize(
    ("job", "node", "error"),
    [
        ({"tolerations": [{"key": "k", "operator": "Maybe"}]}, None, "operator must be Equal or Exists"),
        ({"tolerations": [{"operator": "Equal"}]}, None, "needs a key"),
        (
            {"node_affinity": {"required": [{"match_expressions": [{"key": "k", "operator": "Near"}]}]}},
            None,
            "needs a key and an operator",
        ),
        (
            {
                "node_affinity": {
                    "required": [{"match_expressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}]
                }
            },
            None,
            "needs one integer value",
        ),
        ({"node_affinity": {"preferred": [{"weight": 0, "match_expressions": []}]}}, None, "weight must be"),
        ({"pod_anti_affinity": {}}, None, None),  # empty mapping: no rule
        ({"pod_affinity": {"weight": 5}}, None, "needs a topology_key"),
        ({}, {"taints": [{"key": "k", "effect": "Sometimes"}]}, "effect must be one of"),
    ],
)
def test_scenario_rule_errors(
    job: dict[str, object], node: dict[str, object] | None, error: str | None
) -> None:
    if error is None:
        parse(_scenario(job, node))
        return
    with pytest.raises(ScenarioError, match=error):
        parse(_scenario(job, node))


def test_split_strategies_and_per_pool_multiplier() -> None:
    from scheduler import Config

    cfg = Config(gpu_placement="binpack", cpu_placement="spread", pool_saturation_multiplier={"p": 2.0})
    assert (cfg.strategy(True), cfg.strategy(False), cfg.any_spread) == ("binpack", "spread", True)
    assert Config(placement="spread").strategy(True) == "spread"
    assert (cfg.saturation_multiplier("p"), cfg.saturation_multiplier("other")) == (2.0, 1.0)
    with pytest.raises(
        ScenarioError, match="gpu_placement must be binpack, spread or fragmentation, not 'pack'"
    ):
        parse({**_scenario({}), "config": {"gpu_placement": "pack"}})
    with pytest.raises(ScenarioError, match="saturation multiplier must be a number >= 1"):
        parse({**_scenario({}), "config": {"pool_saturation_multiplier": {"p": 0.5}}})
