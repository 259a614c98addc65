"""KAI's pod grouping and priorities on a real API server (issue 16).

The portal groups pods into jobs as KAI's pod-grouper does (pkg/podgrouper): by the
top owner, with the owner's queue label and gang minimum; a pod naming a KAI PodGroup
takes that object's spec; priorities are the cluster's PriorityClass values. Owners
whose controller is not installed here (PyTorchJob) are real objects of a CRD applied
to the test API server, with pods created directly with ownerReferences to them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes.cache import POD_GROUP_API
from kai_portal.workloads.models import Job, Pod

from .conftest import REPO, Cluster, Nodes, cycle, pod_body, wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("portal")]

PODGROUP_CRD = REPO / "deploy" / "helm" / "kai-portal" / "crds" / "scheduling.run.ai_podgroups.yaml"
PYTORCH_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "scope": "Namespaced",
        "names": {"kind": "PyTorchJob", "plural": "pytorchjobs", "singular": "pytorchjob",
                  "listKind": "PyTorchJobList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}  # fmt: skip


def _crd_served(cluster: Cluster, group: str, version: str, plural: str) -> bool:
    try:
        client.CustomObjectsApi(cluster.api).list_cluster_custom_object(group, version, plural, limit=1)
    except ApiException:
        return False
    return True


@pytest.fixture
def pytorch_crd(cluster: Cluster) -> None:
    """Kubeflow's PyTorchJob kind (no training operator: the test plays its controller)."""
    try:
        client.ApiextensionsV1Api(cluster.api).create_custom_resource_definition(PYTORCH_CRD)
    except ApiException as error:
        if error.status != 409:
            raise
    wait_until(lambda: _crd_served(cluster, "kubeflow.org", "v1", "pytorchjobs"), "the PyTorchJob CRD")


@pytest.fixture
def podgroup_crd(cluster: Cluster) -> None:
    """The PodGroup CRD the chart ships (KAI's scheduling.run.ai/v2alpha2)."""
    cluster.kubectl("apply", "-f", str(PODGROUP_CRD))
    wait_until(lambda: _crd_served(cluster, "scheduling.run.ai", "v2alpha2", "podgroups"), "the PodGroup CRD")


@pytest.fixture
def priority_classes(cluster: Cluster) -> Iterator[dict[str, str]]:
    """Two cluster PriorityClasses outside KAI's built-in four, removed afterwards."""
    api = client.SchedulingV1Api(cluster.api)
    suffix = secrets.token_hex(3)
    names = {"urgent": f"urgent-{suffix}", "low": f"low-{suffix}"}
    for key, value in (("urgent", 1000), ("low", 60)):
        api.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": names[key]}, "value": value})  # fmt: skip
    yield names
    for name in names.values():
        api.delete_priority_class(name)


def _owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True}  # fmt: skip


def _bound(core: client.CoreV1Api, namespace: str) -> dict[str, str | None]:
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(namespace).items}


@pytest.mark.parametrize(("min_available", "bound"), [(None, 0), (2, 2)])
def test_a_pytorchjobs_pods_are_one_gang_of_its_replicas_in_the_queue_on_the_pytorchjob(
    cluster: Cluster, namespace: str, scheduler_name: str, nodes: Nodes, pytorch_crd: None,
    min_available: int | None, bound: int,
) -> None:  # fmt: skip
    """KAI's PyTorchJob grouper (plugins/kubeflow/pytorch): the top owner is one pod group whose
    minimum is runPolicy.schedulingPolicy.minAvailable, else the sum of the replica specs (1
    master + 3 workers = 4); the queue label is read from the PyTorchJob. Two 8-GPU nodes hold
    two 5-GPU pods: a gang of 4 binds none of them, a minimum of 2 binds two."""
    core = cluster.core
    nodes.kwok("gpu-a")
    nodes.kwok("gpu-b")
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}
    if min_available is not None:
        spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    job = client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs",
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": spec,
         "metadata": {"name": "bert", "labels": {"kai.scheduler/queue": "team-a"}}})  # fmt: skip
    for name in ("bert-master-0", "bert-worker-0", "bert-worker-1", "bert-worker-2"):
        pod = pod_body(name, scheduler_name, gpus=5)  # no queue label: only the PyTorchJob names one
        pod["metadata"]["ownerReferences"] = [_owner_ref(job)]
        pod["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
        core.create_namespaced_pod(namespace, pod)

    for _ in range(3):
        cycle()

    assert sum(1 for node in _bound(core, namespace).values() if node) == bound
    row = Job.objects.get(cluster_key=f"{namespace}/PyTorchJob/bert")
    assert (row.queue.name, row.min_member, row.task_count) == ("team-a", min_available or 4, 4)


def test_a_deployments_pods_are_each_their_own_gang_of_one_with_the_deployments_queue(
    cluster: Cluster, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI's Deployment grouper (plugins/deployment/deployment_grouper.go) makes one pod group per
    pod, found through Pod -> ReplicaSet -> Deployment; the queue label on the Deployment alone
    is used, and the default priority class is inference (125, non-preemptible)."""
    core = cluster.core
    nodes.kwok("gpu-1")
    pod = pod_body("unused", scheduler_name, gpus=1, labels={"app": "serve"})
    pod["spec"]["restartPolicy"] = "Always"
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    client.AppsV1Api(cluster.api).create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "serve", "labels": {"kai.scheduler/queue": "team-a"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "serve"}},
                 "template": template}})  # fmt: skip
    replicas = wait_until(lambda: len(core.list_namespaced_pod(namespace).items) == 2 and
                          core.list_namespaced_pod(namespace).items, "the Deployment's 2 pods")  # fmt: skip

    for _ in range(2):
        cycle()

    assert all(_bound(core, namespace).values())
    rows = {Pod.objects.get(name=p.metadata.name).job for p in replicas}
    keys = sorted(f"{namespace}/Pod/{p.metadata.name}" for p in replicas)
    assert sorted(r.cluster_key for r in rows) == keys
    for row in rows:
        assert (row.queue.name, row.task_count, row.min_member) == ("team-a", 1, 1)
        assert (row.priority_class, row.priority, row.is_preemptible) == ("inference", 125, False)


def test_a_podgroup_objects_min_member_and_queue_make_its_pods_one_gang(
    cluster: Cluster, namespace: str, scheduler_name: str, nodes: Nodes, podgroup_crd: None
) -> None:
    """KAI's scheduler reads a pod's PodGroup (annotation pod-group-name): minMember 3 and the
    queue come from the PodGroup's spec, not the pods (which name no queue). Two 8-GPU nodes
    hold two of the three 5-GPU pods, so none is bound; a third node lets all three bind."""
    core = cluster.core
    nodes.kwok("gpu-a")
    nodes.kwok("gpu-b")
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "scheduling.run.ai", "v2alpha2", namespace, "podgroups",
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "trio"},
         "spec": {"minMember": 3, "queue": "team-a", "priorityClassName": "build"}})  # fmt: skip
    for index in range(3):
        core.create_namespaced_pod(namespace, pod_body(
            f"trio-{index}", scheduler_name, gpus=5,
            annotations={"pod-group-name": "trio",
                         "pod-complete.stage.kwok.x-k8s.io/delay": "1h"}))  # fmt: skip

    for _ in range(3):
        cycle()
    assert not any(_bound(core, namespace).values())
    row = Job.objects.get(cluster_key=f"{namespace}/PodGroup/trio")
    assert (row.queue.name, row.min_member, row.task_count) == ("team-a", 3, 3)
    assert (row.priority_class, row.priority, row.is_preemptible) == ("build", 100, False)

    nodes.kwok("gpu-c")
    for _ in range(3):
        cycle()
    assert all(_bound(core, namespace).values())


def test_priorities_are_the_clusters_priorityclass_values_and_order_the_queue(
    cluster: Cluster, namespace: str, scheduler_name: str, nodes: Nodes, priority_classes: dict[str, str]
) -> None:
    """A pod's priority is its PriorityClass's value in the cluster (urgent = 1000, low = 60),
    not a portal bucket: of two pods wanting the only 8 GPUs, the later but urgent one is bound.
    Preemptibility follows KAI's rule (>= 100 non-preemptible) unless the
    kai.scheduler/preemptibility label says otherwise; a label naming no class falls back to train."""
    core = cluster.core
    nodes.kwok("gpu-1")
    team = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("early-low", scheduler_name, gpus=8, labels=team,
                                                   priorityClassName=priority_classes["low"]))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("late-urgent", scheduler_name, gpus=8, labels=team,
                                                   priorityClassName=priority_classes["urgent"]))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body(
        "urgent-but-preemptible", scheduler_name, gpus=8,
        labels={**team, "priorityClassName": priority_classes["urgent"],
                "kai.scheduler/preemptibility": "preemptible"}))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body(
        "unknown-class", scheduler_name, gpus=8,
        labels={**team, "priorityClassName": "no-such-class"}))  # fmt: skip

    cycle()

    bound = {name for name, node in _bound(core, namespace).items() if node}
    assert bound == {"late-urgent"} or bound == {"urgent-but-preemptible"}
    rows = {name: Pod.objects.get(name=name).job for name in _bound(core, namespace)}
    assert (rows["late-urgent"].priority, rows["late-urgent"].is_preemptible) == (1000, False)
    assert (rows["early-low"].priority, rows["early-low"].is_preemptible) == (60, True)
    flagged = rows["urgent-but-preemptible"]
    assert (flagged.priority, flagged.is_preemptible) == (1000, True)
    assert (rows["unknown-class"].priority_class, rows["unknown-class"].priority) == ("train", 50)


def test_podgroups_and_priorityclasses_made_after_the_first_list_are_followed(
    cluster: Cluster, namespace: str, scheduler_name: str, backend: KubernetesBackend, podgroup_crd: None
) -> None:
    """KAI's scheduler follows PodGroups and PriorityClasses through informers; the portal's
    watches (short windows, so a cycle does not wait on objects that rarely change) see one
    created, changed or deleted after its first list."""
    pod = pod_body("late-0", scheduler_name, annotations={"pod-group-name": "late"})
    cluster.core.create_namespaced_pod(namespace, pod)
    first = backend.observe().pods[namespace, "late-0"]
    assert (first.job.key, first.min_member, first.queue) == (f"{namespace}/PodGroup/late", None, None)

    pod_groups = client.CustomObjectsApi(cluster.api)
    later = f"later-{scheduler_name}"
    body = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "late"},
            "spec": {"minMember": 2, "queue": "team-a", "priorityClassName": later}}  # fmt: skip
    pod_groups.create_namespaced_custom_object(*POD_GROUP_API[:2], namespace, "podgroups", body)
    classes = client.SchedulingV1Api(cluster.api)
    classes.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": later}, "value": 321})  # fmt: skip
    try:
        seen = wait_until(lambda: (p := backend.observe().pods[namespace, "late-0"]).priority == 321 and p,
                          "the new PodGroup and PriorityClass", timeout=20)  # fmt: skip
        assert (seen.min_member, seen.queue, seen.priority_class) == (2, "team-a", later)

        pod_groups.delete_namespaced_custom_object(*POD_GROUP_API[:2], namespace, "podgroups", "late")
        gone = wait_until(lambda: (p := backend.observe().pods[namespace, "late-0"]).min_member is None and p,
                          "the PodGroup's deletion", timeout=20)  # fmt: skip
        assert (gone.queue, gone.priority) == (None, 50)
    finally:
        classes.delete_priority_class(later)
