"""What KAI's podgrouper and binder leave on pods, and the PodGroup fields docs/kai-parity.md
listed as still differing, on the real API server (issue 29).

KAI's view of its own quickstart (docs/kai-parity/quickstart-kai.yaml, batch-gang-waiting-kai.yaml):
every pod carries ``pod-group-name`` (podgrouper, pod_controller.go, also while it waits); a bound
pod carries ``received-resource-type: Regular`` and a ``PodBound`` condition (binder: reason
``Bound``, "Pod bound successfully to node <node>") and no ``kai.scheduler/gpu-devices`` for a
whole GPU; memory sums are written as resource.Quantity prints them (``250M``, not ``239Mi``); a
waiting gang's condition names ``PodSchedulingErrors`` as its reason. The portal's writes are
named ``kai-portal`` in managedFields (docs/kai-parity.md says why not KAI's component names).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.workloads.models import Job

from .conftest import Cluster, Nodes, cycle, wait_until
from .test_kai_quickstart import QUICKSTART, apply_example, kai_queue_crd, kai_queues  # noqa: F401
from .test_pod_grouping import podgroup_crd  # noqa: F401
from .test_pod_groups_written import pod_groups

pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("scheduler_name", ["kai-scheduler"])]


def managers(obj: Any) -> set[str]:
    fields = obj.metadata.managed_fields if hasattr(obj, "metadata") else obj["metadata"]["managedFields"]
    return {(f.manager if hasattr(f, "manager") else f["manager"]) for f in fields}


def test_quickstart_pods_carry_kais_podgrouper_and_binder_fields(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    core = cluster.core
    node = nodes.kwok("pods-quickstart", gpus=8)
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/gpu-pod.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/cpu-only-pod.yaml")
    names = ("gpu-pod", "cpu-only-pod")

    def settled() -> bool:
        cycle()
        pods = [core.read_namespaced_pod(p, namespace) for p in names]
        return all(p.status.phase == "Running" for p in pods) and all(
            any(c.type == "PodBound" for c in p.status.conditions or ()) for p in pods
        )

    wait_until(settled, "the quickstart pods bound, with KAI's PodBound condition", timeout=90, every=0.5)
    for _ in range(2):  # more cycles: the pods keep their groups, nothing is re-grouped
        cycle()
    groups = pod_groups(cluster, namespace)
    for name in names:
        pod = core.read_namespaced_pod(name, namespace)
        annotations = pod.metadata.annotations or {}
        assert annotations.get("pod-group-name") == f"pg-{name}-{pod.metadata.uid}", annotations
        assert annotations.get("received-resource-type") == "Regular", annotations
        assert "kai.scheduler/gpu-devices" not in annotations, annotations
        [bound] = [c for c in pod.status.conditions if c.type == "PodBound"]
        assert (bound.status, bound.reason, bound.message) == (
            "True", "Bound", f"Pod bound successfully to node {node}")  # fmt: skip
        # The PodGroup the annotation names is the one the portal wrote for the pod as its owner.
        group = groups[annotations["pod-group-name"]]
        assert group["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.metadata.uid}]  # fmt: skip
        assert managers(group) == {"kai-portal"}, group["metadata"]["managedFields"]
    assert sorted(groups) == sorted(
        f"pg-{n}-{core.read_namespaced_pod(n, namespace).metadata.uid}" for n in names
    )
    # Annotated, each pod is still its own job in the portal (not a new job named by the annotation).
    jobs = {j.name: j.cluster_key for j in Job.objects.filter(namespace=namespace)}
    assert jobs == {n: f"{namespace}/Pod/{n}" for n in names}, jobs
    # cpu-only-pod.yaml asks 250M of memory: KAI's podgroup controller sums resource.Quantity.
    cpu = groups[f"pg-cpu-only-pod-{core.read_namespaced_pod('cpu-only-pod', namespace).metadata.uid}"]
    resources = cpu["status"]["resourcesStatus"]
    assert resources["requested"]["memory"] == resources["allocated"]["memory"] == "250M", resources
    queue = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
        "scheduling.run.ai", "v2", "queues", "default-queue")  # fmt: skip
    assert queue["status"]["requested"]["memory"] == "250M", queue["status"]
    assert "kai-portal" in managers(queue)


def test_a_waiting_gangs_pods_name_their_group_and_its_reason_is_kais(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    nodes.kwok("pods-one-gpu", gpus=1)
    apply_example(cluster, namespace, "docs/batch/batch-job-min-member.yaml")
    job = cluster.batch.read_namespaced_job("batch-job-min-member", namespace)
    name = f"pg-batch-job-min-member-{job.metadata.uid}"

    def waiting() -> dict[str, Any] | None:
        cycle()
        pods = cluster.core.list_namespaced_pod(namespace).items
        named = len(pods) == 6 and all((p.metadata.annotations or {}).get("pod-group-name") for p in pods)
        group = pod_groups(cluster, namespace).get(name)
        conditions = (group or {}).get("status", {}).get("schedulingConditions")
        return group if named and conditions else None

    group = wait_until(waiting, "the gang's pods annotated and its condition written", timeout=90, every=0.5)
    for pod in cluster.core.list_namespaced_pod(namespace).items:
        assert pod.metadata.annotations["pod-group-name"] == name
        assert not pod.spec.node_name
        assert "received-resource-type" not in pod.metadata.annotations
    [condition] = group["status"]["schedulingConditions"]
    prefix = "PodSchedulingErrors: "
    assert condition["message"].startswith(prefix) and condition["message"].endswith("GPUs.."), condition
    # The error's own text: without the prefix, nor the "." JobFitErrorsToMessage adds.
    own = condition["message"].removeprefix(prefix)[:-1]
    assert condition["reasons"] == [{"reason": "PodSchedulingErrors", "message": own}]
    assert sorted(pod_groups(cluster, namespace)) == [name]


def test_a_group_with_fewer_pods_than_its_minimum_gets_kais_not_ready_event(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]], podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    """KAI's scheduler posts ``NotReady`` (Normal) about a PodGroup whose live pods are fewer than
    its minimum (status_updater: "Job is not ready for scheduling. Waiting for ..."). Under KAI's
    batch example it showed while the Job controller was still making pods; a Job that runs one
    pod at a time with a gang minimum of 2 stays in that state, so the event must come."""
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    nodes.kwok("pods-not-ready", gpus=8)
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "one-at-a-time", "annotations": {"kai.scheduler/batch-min-member": "2"},
                     "labels": {"kai.scheduler/queue": "default-queue"}},
        "spec": {"parallelism": 1, "completions": 2, "template": {
            "metadata": {"labels": {"kai.scheduler/queue": "default-queue"}},
            "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    }  # fmt: skip
    made = cluster.batch.create_namespaced_job(namespace, job)
    name = f"pg-one-at-a-time-{made.metadata.uid}"

    def not_ready() -> list[Any]:
        cycle()
        return [
            e for e in cluster.core.list_namespaced_event(namespace).items
            if e.reason == "NotReady" and e.involved_object.name == name
        ]  # fmt: skip

    [event] = wait_until(not_ready, "KAI's NotReady event on the PodGroup", timeout=60, every=0.5)
    assert (event.type, event.involved_object.kind, event.message) == (
        "Normal", "PodGroup",
        "Job is not ready for scheduling. Waiting for 2 pods, currently 1 exist, 0 are gated",
    )  # fmt: skip
    assert not cluster.core.list_namespaced_pod(namespace).items[0].spec.node_name
