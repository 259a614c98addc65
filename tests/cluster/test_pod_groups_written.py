"""PodGroups and Bound events as KAI writes them, on the real API server (issue 29, item 3).

KAI's podgrouper makes a PodGroup for every workload within seconds, its podgroup controller and
scheduler fill the status, and its binder posts ``Bound`` for every bound pod; dashboards and
``kubectl get podgroups`` read them. Here KAI's quickstart and batch examples are applied unchanged
and the portal (as the kai-portal ServiceAccount, with the project's RBAC) must leave the same
fields filled (``kai_object_fields.py``, docs/kai-objects.md), and never touch a PodGroup someone
else wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, cycle, pod_body, wait_until
from .kai_object_fields import BOUND_EVENT, POD_GROUP_RUNNING, POD_GROUP_WAITING, field_paths
from .test_kai_quickstart import QUICKSTART, apply_example, kai_queue_crd, kai_queues  # noqa: F401
from .test_pod_grouping import podgroup_crd  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("scheduler_name", ["kai-scheduler"])]

PG = ("scheduling.run.ai", "v2alpha2")


def pod_groups(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's PodGroups by name, as ``kubectl get podgroups -o yaml`` shows them."""
    listed = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(*PG, namespace, "podgroups")
    return {item["metadata"]["name"]: item for item in listed["items"]}


def events_about(cluster: Cluster, namespace: str, reason: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for event in cluster.core.list_namespaced_event(namespace).items:
        if event.reason == reason:
            out.setdefault(event.involved_object.name, []).append(event)
    return out


def test_kai_quickstart_pods_get_podgroups_bound_events_and_kais_fields(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    """gpu-pod.yaml and cpu-only-pod.yaml: each bare pod is its own top owner, so KAI's podgrouper
    names the PodGroup ``pg-<pod>-<pod uid>``, owned by the pod, queue and labels from the pod,
    min 1, class ``train``; once bound its status holds what the pod requests and is allocated,
    and the binder's ``Bound`` event is there."""
    core = cluster.core
    node = nodes.kwok("pg-quickstart", gpus=8)
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/gpu-pod.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/cpu-only-pod.yaml")
    names = ("gpu-pod", "cpu-only-pod")

    def running() -> bool:
        cycle()
        return all(core.read_namespaced_pod(p, namespace).status.phase == "Running" for p in names)

    wait_until(running, "the portal to bind the quickstart pods", timeout=90, every=0.5)
    cycle()  # a settled cycle: nothing more to write
    groups = pod_groups(cluster, namespace)
    listed = cluster.kubectl("get", "podgroups", "-n", namespace, "-o", "name").split()
    assert sorted(listed) == sorted(f"podgroup.scheduling.run.ai/{n}" for n in groups)
    for name in names:
        pod = core.read_namespaced_pod(name, namespace)
        uid = pod.metadata.uid
        group = groups[f"pg-{name}-{uid}"]
        missing = set(POD_GROUP_RUNNING) - field_paths(group)
        assert not missing, (name, missing, group)
        meta, spec, status = group["metadata"], group["spec"], group["status"]
        assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}]
        assert meta["labels"]["kai.scheduler/queue"] == "default-queue"
        assert yaml.safe_load(meta["annotations"]["kai.scheduler/top-owner-metadata"]) == {
            "name": name, "uid": uid, "group": "", "version": "v1", "kind": "Pod"}  # fmt: skip
        assert (spec["minMember"], spec["queue"], spec["priorityClassName"]) == (1, "default-queue", "train")
        # train (50) is preemptible: nothing allocated non-preemptible (KAI's podgroup controller).
        assert "allocatedNonPreemptible" not in status["resourcesStatus"]
        assert not status.get("schedulingConditions")
    gpu = groups[f"pg-gpu-pod-{core.read_namespaced_pod('gpu-pod', namespace).metadata.uid}"]
    assert gpu["status"]["resourcesStatus"] == {"allocated": {"nvidia.com/gpu": "1"},
                                                "requested": {"nvidia.com/gpu": "1"}}  # fmt: skip
    cpu = groups[f"pg-cpu-only-pod-{core.read_namespaced_pod('cpu-only-pod', namespace).metadata.uid}"]
    assert cpu["status"]["resourcesStatus"]["allocated"]["cpu"] == "100m"

    # KAI's binder: one Bound event per bound pod, from the binder.
    bound = events_about(cluster, namespace, "Bound")
    for name in names:
        [event] = bound[name]
        missing = set(BOUND_EVENT) - field_paths(client.ApiClient().sanitize_for_serialization(event))
        assert not missing, missing
        assert (event.type, event.message, event.source.component, event.involved_object.kind) == (
            "Normal",
            f"Pod bound successfully to node {node}",
            "binder",
            "Pod",
        )

    # Idempotent: more cycles on a settled cluster write no PodGroup again.
    versions = {n: g["metadata"]["resourceVersion"] for n, g in groups.items()}
    cycle()
    cycle()
    assert {
        n: g["metadata"]["resourceVersion"] for n, g in pod_groups(cluster, namespace).items()
    } == versions


def test_a_waiting_gang_gets_kais_scheduling_condition_until_it_starts(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    """docs/batch/batch-job-min-member.yaml on one GPU: the Job's PodGroup (owned by the Job, min
    2) says why it waits (UnschedulableOnNodePool on node pool ``default``) and gets the
    scheduler's PodGroup event; once the gang starts the condition is cleared and the start is
    stamped."""
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    nodes.kwok("pg-one-gpu", gpus=1)
    apply_example(cluster, namespace, "docs/batch/batch-job-min-member.yaml")
    job = cluster.batch.read_namespaced_job("batch-job-min-member", namespace)
    name = f"pg-batch-job-min-member-{job.metadata.uid}"

    def waiting() -> dict[str, Any] | None:
        cycle()
        group = pod_groups(cluster, namespace).get(name)
        conditions = (group or {}).get("status", {}).get("schedulingConditions")
        return group if conditions else None

    group = wait_until(waiting, "the gang's PodGroup to say why it waits", timeout=60, every=0.5)
    missing = set(POD_GROUP_WAITING) - field_paths(group)
    assert not missing, (missing, group)
    assert group["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "batch-job-min-member", "uid": job.metadata.uid}
    ]
    assert group["spec"]["minMember"] == 2
    [condition] = group["status"]["schedulingConditions"]
    assert (condition["type"], condition["nodePool"], condition["reason"], condition["status"]) == (
        "UnschedulableOnNodePool",
        "default",
        "Unschedulable",
        "True",
    )
    assert condition["transitionID"] == "1" and condition["message"]
    assert "allocated" not in group["status"]["resourcesStatus"]
    assert group["status"]["resourcesStatus"]["requested"] == {"nvidia.com/gpu": "6"}
    [event] = events_about(cluster, namespace, "Unschedulable")[name]
    assert (event.involved_object.kind, event.type, event.message) == (
        "PodGroup",
        "Normal",
        condition["message"],
    )

    nodes.kwok("pg-eight-gpus", gpus=8)

    def started() -> dict[str, Any] | None:
        cycle()
        group = pod_groups(cluster, namespace)[name]
        return (
            group
            if "kai.scheduler/last-start-timestamp" in group["metadata"].get("annotations", {})
            else None
        )

    group = wait_until(started, "the gang to start", timeout=90, every=0.5)
    # Stamped in the cycle that bound the gang, with the status of that cycle: all 6 allocated.
    assert group["status"]["resourcesStatus"]["allocated"] == {"nvidia.com/gpu": "6"}
    cycle()
    group = pod_groups(cluster, namespace)[name]
    assert not group["status"].get("schedulingConditions")


def test_a_podgroup_written_by_someone_else_is_never_changed(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    scheduler_name: str, kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    """KAI's podgrouper (or a user) wrote the pod's PodGroup under KAI's own name first: the portal
    creates none, and leaves that object's spec, labels and status exactly as they were."""
    core = cluster.core
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    nodes.kwok("pg-theirs", gpus=8)
    labels = {"kai.scheduler/queue": "default-queue"}
    pod = core.create_namespaced_pod(namespace, pod_body("theirs", scheduler_name, gpus=1, labels=labels))
    name = f"pg-theirs-{pod.metadata.uid}"
    theirs = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
              "metadata": {"name": name, "labels": {"made-by": "kai-podgrouper"}},
              "spec": {"minMember": 1, "queue": "default-queue", "priorityClassName": "train"}}  # fmt: skip
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(*PG, namespace, "podgroups", theirs)
    before = pod_groups(cluster, namespace)[name]

    def bound() -> bool:
        cycle()
        return bool(core.read_namespaced_pod("theirs", namespace).spec.node_name)

    wait_until(bound, "the portal to bind the pod", timeout=60, every=0.5)
    cycle()
    after = pod_groups(cluster, namespace)
    assert list(after) == [name]
    assert after[name]["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "status" not in after[name] or not after[name]["status"]
