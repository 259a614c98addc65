"""Sub-group trees (scheduler/gang.py): minimums, satisfaction, surplus, scenario syntax."""

from __future__ import annotations

import pytest

from scheduler import Job, Task
from scheduler.gang import meets_minimum, short_subgroup, surplus_task
from scheduler.model import SubGroup
from scheduler.scenario import ScenarioError, parse


def serving() -> Job:
    groups = [
        SubGroup("router", 1),
        SubGroup("serving", parent=None, min_subgroups=1),
        SubGroup("r0", parent="serving"),
        SubGroup("r0-p", 1, "r0"),
        SubGroup("r0-d", 2, "r0"),
        SubGroup("r1", parent="serving"),
        SubGroup("r1-p", 1, "r1"),
        SubGroup("r1-d", 1, "r1"),
    ]
    names = ["router", "r0-p", "r0-d", "r0-d", "r1-p", "r1-d"]
    tasks = [Task(f"t{i}", subgroup=g) for i, g in enumerate(names)]
    return Job("s", "q", tasks=tasks, subgroups=groups)


def test_tree_minimum_is_the_cheapest_way_to_satisfy_it() -> None:
    job = serving()
    assert job.gang_min == 1 + 2  # router + replica r1 (1 + 1); r0 would need 3
    t = {x.name: x for x in job.tasks}
    assert meets_minimum(job, [t["t0"], t["t4"], t["t5"]])
    assert not meets_minimum(job, [t["t0"], t["t1"], t["t2"]])  # r0 lacks its second decode pod
    assert short_subgroup(job, [t["t4"], t["t5"]]) == "router"
    assert short_subgroup(job, [t["t0"], t["t4"]]) == "r0-p"  # first unsatisfied replica, to a leaf


def test_surplus_keeps_the_tree_satisfied() -> None:
    job = serving()
    t = {x.name: x for x in job.tasks}
    active = [t["t5"], t["t4"], t["t0"], t["t1"]]  # r1 complete, r0 partial, router
    assert surplus_task(job, active) is t["t1"]  # r0's pod can go; r1's and the router cannot
    assert surplus_task(job, [t["t5"], t["t4"], t["t0"]]) is None


def _scenario(subgroups: list[dict[str, object]], tasks: list[dict[str, object]]) -> dict[str, object]:
    return {
        "name": "x",
        "nodes": [{"name": "n0", "gpus": 1}],
        "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "subgroups": subgroups, "tasks": tasks}],
    }


@pytest.mark.parametrize(
    ("subgroups", "tasks", "error"),
    [
        ([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}], [], "cycle"),
        ([{"name": "a", "parent": "nope"}], [], "unknown parent"),
        ([{"name": "a"}, {"name": "b", "parent": "a"}], [{"subgroup": "a"}], "which has sub-groups"),
        ([{"name": "a", "min_available": 2}], [{"subgroup": "a"}], "fewer pods than its minimum"),
        ([{"name": "a", "min_subgroups": 2}, {"name": "b", "parent": "a"}], [], "fewer children"),
        ([{"name": "a"}, {"name": "a"}], [], "unique"),
        ([{"name": "a"}], [{"subgroup": "z"}], "unknown sub-group"),
    ],
)
def test_scenario_subgroup_errors(
    subgroups: list[dict[str, object]], tasks: list[dict[str, object]], error: str
) -> None:
    with pytest.raises(ScenarioError, match=error):
        parse(_scenario(subgroups, tasks))
