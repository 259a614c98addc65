"""Rules of the Queue object sync (``cluster/queue_sync.apply_queue_objects``) that the cluster
tests do not reach: one object the portal cannot take never stops the others, unknown parents
wait, and rows that never came from the cluster are not the sync's to delete."""

from __future__ import annotations

from typing import Any

import pytest

from kai_portal.cluster.queue_sync import apply_queue_objects
from kai_portal.queues.models import Queue
from tests.portal import factories

pytestmark = pytest.mark.django_db


def obj(
    name: str, rv: str, *, parent: str | None = None, gpu: float = 0, uid: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resources": {
            r: {"quota": gpu if r == "gpu" else 0, "limit": -1, "overQuotaWeight": 1}
            for r in ("gpu", "cpu", "memory")
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "uid": uid or f"uid-{name}", "resourceVersion": rv},
        "spec": spec,
    }


def by_name(*objects: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects}


def test_an_object_the_portal_refuses_is_reported_on_its_row_and_the_others_still_apply(caplog: Any) -> None:
    apply_queue_objects(by_name(obj("dept", "1", gpu=4), obj("a", "1", parent="dept", gpu=2)))
    # b's quota does not fit in dept's next to a's (the portal's quota-split rule): b is refused, a updates.
    apply_queue_objects(
        by_name(
            obj("dept", "1", gpu=4), obj("a", "2", parent="dept", gpu=1), obj("b", "1", parent="dept", gpu=5)
        )
    )
    assert Queue.objects.get(name="a").gpu_quota == 1
    assert not Queue.objects.filter(name="b").exists()
    assert "queue b: The cluster's Queue object (resourceVersion 1) is not applied" in caplog.text
    # An update the rules refuse keeps the row as it was, says why on it, and is retried next cycle.
    apply_queue_objects(by_name(obj("dept", "1", gpu=4), obj("a", "3", parent="dept", gpu=9)))
    a = Queue.objects.get(name="a")
    assert a.gpu_quota == 1 and a.cluster_resource_version == "2"
    assert "is not applied" in a.cluster_message and "spec.resources.gpu.quota" in a.cluster_message
    apply_queue_objects(by_name(obj("dept", "2", gpu=10), obj("a", "3", parent="dept", gpu=9)))
    a.refresh_from_db()
    assert (a.gpu_quota, a.cluster_resource_version, a.cluster_message) == (9, "3", "")


def test_a_child_waits_for_its_parent_and_parents_apply_first_in_one_cycle() -> None:
    apply_queue_objects(by_name(obj("child", "1", parent="later")))
    assert not Queue.objects.filter(name="child").exists()
    # Both arrive: the parent is created first whatever the order, so the child finds it.
    apply_queue_objects(by_name(obj("child", "1", parent="later"), obj("later", "1")))
    assert Queue.objects.get(name="child").parent == Queue.objects.get(name="later")


def test_rows_that_never_came_from_the_cluster_are_left_alone() -> None:
    factories.queue("portal-only", gpu_quota=2)
    apply_queue_objects({})
    assert Queue.objects.filter(name="portal-only").exists()
    # A same-named object is adopted: the row takes its values and its uid.
    apply_queue_objects(by_name(obj("portal-only", "7", gpu=3, uid="u-7")))
    row = Queue.objects.get(name="portal-only")
    assert (row.gpu_quota, row.cluster_uid, row.cluster_resource_version) == (3, "u-7", "7")
    apply_queue_objects({})
    assert not Queue.objects.filter(name="portal-only").exists()


def test_a_kai_queue_whose_quota_is_above_its_limit_is_applied_capped_as_kai_schedules_it() -> None:
    """KAI accepts a Queue whose quota exceeds its limit (an omitted limit is 0, as in its own
    hierarchy example: GPU quota 1, no limit) and never lets it hold more than the limit. The
    portal stores the quota the limit leaves instead of refusing the object, and says so."""
    parent = obj("research", "1", gpu=2)
    parent["spec"]["resources"]["cpu"]["quota"] = 8000
    team = obj("ml-team", "1", parent="research")
    team["spec"]["resources"]["gpu"] = {"quota": 1}  # no limit: 0
    team["spec"]["resources"]["cpu"] = {"quota": -1, "limit": 4000, "overQuotaWeight": 1}
    apply_queue_objects(by_name(parent, team))

    row = Queue.objects.get(name="ml-team")
    assert (row.parent.name, row.gpu_quota, row.gpu_limit) == ("research", 0, 0)
    assert (row.cpu_quota, row.cpu_limit) == (4000, 4000)
    assert row.cluster_message == (
        "gpu quota 1 is above its limit 0: the limit caps the queue (as in KAI), so the portal uses "
        "quota 0; cpu quota -1 is above its limit 4000: the limit caps the queue (as in KAI), so the "
        "portal uses quota 4000"
    )
    # Fixed in the cluster: the row follows and the message goes.
    team["spec"]["resources"]["gpu"] = {"quota": 1, "limit": 2}
    team["spec"]["resources"]["cpu"] = {"quota": 0, "limit": -1}
    team["metadata"]["resourceVersion"] = "2"
    apply_queue_objects(by_name(parent, team))
    row.refresh_from_db()
    assert (row.gpu_quota, row.gpu_limit, row.cpu_quota, row.cpu_limit) == (1, 2, 0, -1)
    assert row.cluster_message == ""


def labelled(o: dict[str, Any], pool: str) -> dict[str, Any]:
    o["metadata"]["labels"] = {"kai.scheduler/node-pool": pool}
    return o


def test_a_pools_sync_applies_and_deletes_only_its_pools_queues() -> None:
    """Shards: a node pool's cycle applies only the objects of its pool (the label, else the
    parent's pool, else the default pool) and deletes only its own rows whose object is gone, so
    two pools' cycles never write one queue row."""
    from kai_portal.nodes.models import NodePool

    for pool in ("a", "b"):
        NodePool.objects.get_or_create(name=pool)
    objects = by_name(
        labelled(obj("dept-a", "1", gpu=4), "a"), obj("team-a", "1", parent="dept-a", gpu=2),
        labelled(obj("dept-b", "1", gpu=4), "b"), obj("plain", "1", gpu=1),
    )  # fmt: skip
    apply_queue_objects(objects, pool="a")
    assert dict(Queue.objects.values_list("name", "node_pool__name")) == {"dept-a": "a", "team-a": "a"}
    apply_queue_objects(objects, pool="b")
    apply_queue_objects(objects, pool="default")
    assert dict(Queue.objects.values_list("name", "node_pool__name")) == {
        "dept-a": "a", "team-a": "a", "dept-b": "b", "plain": "default"}  # fmt: skip
    # dept-b's object is gone: pool a's cycle leaves its row (b's), pool b's deletes it.
    del objects["dept-b"]
    apply_queue_objects(objects, pool="a")
    assert Queue.objects.filter(name="dept-b").exists()
    apply_queue_objects(objects, pool="b")
    assert not Queue.objects.filter(name="dept-b").exists()
