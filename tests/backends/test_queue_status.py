"""``Queue.status`` as KAI's queue controller computes it: the pure parts.

Written to a real API server: tests/cluster/test_queue_status.py.
"""

from __future__ import annotations

from typing import Any

from kai_portal.cluster.backends.base import GpuRequest
from kai_portal.cluster.backends.kubernetes.pod_groups import PodGroupPlan
from kai_portal.cluster.backends.kubernetes.queue_status import desired_statuses, queue_usage, status_patch

from .test_pod_groups import observed


def queue_object(name: str, parent: str = "", status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {"parentQueue": parent} if parent else {}
    return {"metadata": {"name": name}, "spec": spec, "status": status or {}}


def test_children_and_sums_go_up_the_tree_as_kais_controller_settles_them() -> None:
    queues = {q["metadata"]["name"]: q for q in (
        queue_object("dept"), queue_object("team-a", "dept"), queue_object("team-b", "dept"),
        queue_object("idle"))}  # fmt: skip
    groups = [
        PodGroupPlan("ns", name, [pod])
        for name, pod in (
            ("a", observed("a", queue="team-a", node="n1", gpu=GpuRequest(whole=2), priority=100)),
            ("b", observed("b", queue="team-b", gpu=GpuRequest(whole=1))),
            ("c", observed("c", queue="team-b", node="n2", cpu_millis=500)),
        )
    ]
    statuses = desired_statuses(queues, queue_usage(groups))
    assert statuses["dept"] == {
        "childQueues": ["team-a", "team-b"],
        "allocated": {"cpu": "500m", "nvidia.com/gpu": "2"},
        "allocatedNonPreemptible": {"nvidia.com/gpu": "2"},
        "requested": {"cpu": "500m", "nvidia.com/gpu": "3"},
    }
    assert statuses["team-b"] == {
        "allocated": {"cpu": "500m"},
        "requested": {"cpu": "500m", "nvidia.com/gpu": "1"},
    }
    assert statuses["idle"] == {}


def test_a_parent_loop_in_the_objects_does_not_recurse_forever() -> None:
    queues = {"a": queue_object("a", "b"), "b": queue_object("b", "a")}
    statuses = desired_statuses(
        queues, queue_usage([PodGroupPlan("ns", "x", [observed("x", queue="a", node="n", cpu_millis=1000)])])
    )
    assert statuses["a"]["childQueues"] == ["b"] and statuses["b"]["childQueues"] == ["a"]


def test_the_patch_is_none_when_equal_and_names_each_value_to_drop() -> None:
    current = {"childQueues": ["x"], "allocated": {"cpu": "1", "nvidia.com/gpu": "1"},
               "requested": {"cpu": "1"}, "conditions": [{"type": "Other"}]}  # fmt: skip
    assert status_patch(current, {"childQueues": ["x"], "allocated": {"cpu": "1", "nvidia.com/gpu": "1"},
                                  "requested": {"cpu": "1"}}) is None  # fmt: skip
    patch = status_patch(current, {"allocated": {"cpu": "2"}})
    assert patch == {"status": {"childQueues": None, "allocated": {"nvidia.com/gpu": None, "cpu": "2"},
                                "requested": None}}  # fmt: skip
