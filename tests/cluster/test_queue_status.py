"""``Queue.status`` as KAI's queue controller writes it, on the real API server (issue 29, item 3).

Under KAI, ``kubectl get queues`` shows each queue's children and ``-o yaml`` its allocated and
requested resources (the sums of its PodGroups and its children). The portal, as the kai-portal
ServiceAccount with the project's RBAC, writes the same fields from its cycle, and only when
they change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, cycle, wait_until
from .kai_object_fields import QUEUE_LEAF, QUEUE_PARENT, field_paths
from .test_kai_quickstart import QUICKSTART, apply_example, kai_queue_crd, kai_queues  # noqa: F401
from .test_pod_grouping import podgroup_crd  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("scheduler_name", ["kai-scheduler"])]


def queue(cluster: Cluster, name: str) -> dict[str, Any]:
    api = client.CustomObjectsApi(cluster.api)
    return api.get_cluster_custom_object("scheduling.run.ai", "v2", "queues", name)  # type: ignore[no-any-return]


def test_kai_quickstart_queues_show_children_allocated_and_requested(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    core = cluster.core
    # KAI's queues are cluster-wide: the quickstart pods of earlier tests (their namespaces being
    # deleted) would count in them too, as they would under KAI.
    selector = "kai.scheduler/queue=default-queue"
    wait_until(lambda: not core.list_pod_for_all_namespaces(label_selector=selector).items,
               "earlier tests' default-queue pods to go", timeout=90, every=0.5)  # fmt: skip
    nodes.kwok("queue-status", gpus=8)
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/gpu-pod.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/cpu-only-pod.yaml")

    def running() -> bool:
        cycle()
        pods = ("gpu-pod", "cpu-only-pod")
        return all(core.read_namespaced_pod(p, namespace).status.phase == "Running" for p in pods)

    wait_until(running, "the portal to bind the quickstart pods", timeout=90, every=0.5)
    cycle()
    leaf, parent = queue(cluster, "default-queue"), queue(cluster, "default-parent-queue")
    assert not set(QUEUE_LEAF) - field_paths(leaf), leaf
    assert not set(QUEUE_PARENT) - field_paths(parent), parent
    assert parent["status"]["childQueues"] == ["default-queue"]
    assert "childQueues" not in leaf["status"]
    # gpu-pod: one GPU; cpu-only-pod: 100m and 250M (counted in whole MiB, rounded up: 239Mi).
    want = {"cpu": "100m", "memory": "250M", "nvidia.com/gpu": "1"}  # as KAI's queue controller prints it
    for obj in (leaf, parent):
        assert obj["status"]["allocated"] == want and obj["status"]["requested"] == want
        assert "allocatedNonPreemptible" not in obj["status"]  # train is preemptible
    # kubectl's Children column reads status.childQueues (KAI's printer column).
    table = cluster.kubectl("get", "queues", "default-parent-queue", "--no-headers")
    assert '["default-queue"]' in table.split(), table

    # Written only when it changes: more cycles on a settled cluster leave the objects alone.
    versions = [q["metadata"]["resourceVersion"] for q in (leaf, parent)]
    cycle()
    cycle()
    names = ("default-queue", "default-parent-queue")
    assert [queue(cluster, n)["metadata"]["resourceVersion"] for n in names] == versions

    # The GPU pod goes: its GPU leaves both queues' sums (the resource is dropped, not left at 1).
    core.delete_namespaced_pod("gpu-pod", namespace, grace_period_seconds=0)

    def gpu_gone() -> bool:
        cycle()
        return all("nvidia.com/gpu" not in queue(cluster, n)["status"].get("allocated", {})
                   for n in ("default-queue", "default-parent-queue"))  # fmt: skip

    wait_until(gpu_gone, "the deleted pod's GPU to leave the queues' status", timeout=60, every=0.5)
    assert queue(cluster, "default-parent-queue")["status"]["allocated"] == {"cpu": "100m", "memory": "250M"}
