"""The portal as the scheduler of a real API server, end to end (issue 15's done-when).

Two KWOK nodes with 8 ``nvidia.com/gpu`` each. The portal runs with
``CLUSTER_BACKEND=kubernetes`` and the ``kubernetes`` client configured from a
kubeconfig for the ``kai-portal`` ServiceAccount (the RBAC in deploy/rbac/).
Its scheduling cycles bind a bare Pod and the pods the Job controller makes
for a batch Job; KWOK runs them (the Job's pods to completion), and the
Events the portal writes are what ``kubectl get events`` shows.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.nodes.models import Node, NodePool
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

from .conftest import Cluster, Nodes, cycle, pod_body, wait_until

pytestmark = pytest.mark.django_db


def _job_body(name: str, scheduler: str, queue: str) -> dict[str, Any]:
    pod = pod_body("unused", scheduler, gpus=3, labels={"kai.scheduler/queue": queue})
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"completions": 4, "parallelism": 2, "backoffLimit": 0, "template": template},
    }


def test_portal_binds_a_pod_and_a_batch_jobs_pods_which_kwok_runs_to_completion(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    core, batch = cluster.core, cluster.batch
    gpu_nodes = {nodes.kwok("gpu-a"), nodes.kwok("gpu-b")}
    # KWOK takes the nodes over: it heartbeats them and reports itself as the kubelet.
    def kwok_runs(node: str) -> bool:
        return str(core.read_node(node).status.node_info.kubelet_version).startswith("kwok")

    wait_until(lambda: all(kwok_runs(n) for n in gpu_nodes), "KWOK to initialise both nodes")

    labels = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("single", scheduler_name, gpus=4, labels=labels))
    batch.create_namespaced_job(namespace, _job_body("batch", scheduler_name, "team-a"))

    def job_complete() -> bool:
        cycle()
        job = batch.read_namespaced_job("batch", namespace)
        return (job.status.succeeded or 0) == 4

    wait_until(job_complete, "the portal to bind all 4 of the Job's pods and KWOK to complete them",
               timeout=120, every=0.5)  # fmt: skip

    single = core.read_namespaced_pod("single", namespace)
    assert single.spec.node_name in gpu_nodes
    assert single.status.phase == "Running"  # KWOK runs a bare pod until it is deleted
    # As KAI's binder leaves a whole-GPU pod: its resource type, no device (the device plugin picks).
    assert single.metadata.annotations["received-resource-type"] == "Regular"
    assert "kai.scheduler/gpu-devices" not in single.metadata.annotations
    job = batch.read_namespaced_job("batch", namespace)
    assert [c.type for c in job.status.conditions if c.status == "True"][-1] == "Complete"
    job_pods = core.list_namespaced_pod(namespace, label_selector="batch.kubernetes.io/job-name=batch").items
    assert len(job_pods) == 4
    assert all(p.spec.node_name in gpu_nodes and p.status.phase == "Succeeded" for p in job_pods)
    # The portal's rows follow the cluster.
    assert Pod.objects.get(name="single").state == "running"

    # Everything the portal wrote is visible to a person with kubectl.
    events = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
    scheduled = {e["involvedObject"]["name"]: e for e in events if e["reason"] == "Scheduled"}
    bound = {"single": single.spec.node_name} | {p.metadata.name: p.spec.node_name for p in job_pods}
    assert set(scheduled) == set(bound)
    for name, node in bound.items():
        event = scheduled[name]
        assert event["message"] == (
            f"Successfully assigned pod {namespace}/{name} to node {node} at node-pool default")
        assert (event["type"], event["source"]["component"]) == ("Normal", scheduler_name)
    table = cluster.kubectl("get", "events", "-n", namespace)
    assert f"Successfully assigned pod {namespace}/single to node {single.spec.node_name}" in table


def test_one_cycle_binds_what_fits_and_explains_what_cannot_and_never_binds_twice(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    core = cluster.core
    node = nodes.kwok("gpu-1")
    labels = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("fits", scheduler_name, gpus=2, labels=labels))
    core.create_namespaced_pod(namespace, pod_body("too-big", scheduler_name, gpus=16, labels=labels))

    cycle()

    assert core.read_namespaced_pod("fits", namespace).spec.node_name == node
    assert core.read_namespaced_pod("too-big", namespace).spec.node_name is None
    fits = Pod.objects.get(name="fits")
    assert fits.state == "bound" and fits.job.cluster_key == f"{namespace}/Pod/fits"
    events = core.list_namespaced_event(namespace).items
    [unschedulable] = [e for e in events if e.reason == "Unschedulable" and e.involved_object.kind == "Pod"]
    too_big = Pod.objects.get(name="too-big")
    assert (unschedulable.type, unschedulable.involved_object.name) == ("Warning", "too-big")
    assert unschedulable.message == too_big.reason and too_big.state == "pending"
    assert "GPU" in unschedulable.message
    # KAI / kube-scheduler status on the waiting pod (issue 16): PodScheduled=False, the same words.
    waiting = core.read_namespaced_pod("too-big", namespace)
    [condition] = [c for c in waiting.status.conditions if c.type == "PodScheduled"]
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == too_big.reason
    # The API server marks a bound pod scheduled itself.
    bound = core.read_namespaced_pod("fits", namespace)
    assert [c.status for c in bound.status.conditions if c.type == "PodScheduled"] == ["True"]

    # Later cycles see the pod bound (then Running, by KWOK): nothing is bound twice,
    # which the real server would refuse with a 409 and a FailedBinding event.
    wait_until(lambda: core.read_namespaced_pod("fits", namespace).status.phase == "Running", "KWOK")
    cycle()
    cycle()
    events = core.list_namespaced_event(namespace).items
    reasons = sorted(e.reason for e in events if e.involved_object.name == "fits")
    assert reasons == ["Bound", "Scheduled"]  # the scheduler's and KAI's binder's, once each
    # The same explanation is not written to the pod again on every cycle.
    assert core.read_namespaced_pod("too-big", namespace).metadata.resource_version == (
        waiting.metadata.resource_version)
    assert Pod.objects.get(name="fits").state == "running"


def test_a_node_shared_with_another_schedulers_pod_is_not_over_committed(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI charges every pod on a node to it, whichever scheduler placed the pod."""
    core = cluster.core
    node = nodes.kwok("shared")
    core.create_namespaced_pod(namespace, pod_body("theirs", "default-scheduler", gpus=6))
    target = client.V1ObjectReference(api_version="v1", kind="Node", name=node)
    core.create_namespaced_pod_binding(
        "theirs", namespace, client.V1Binding(metadata=client.V1ObjectMeta(name="theirs"), target=target),
        _preload_content=False)  # fmt: skip
    wait_until(lambda: core.read_namespaced_pod("theirs", namespace).status.phase == "Running", "KWOK")
    labels = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("ours", scheduler_name, gpus=4, labels=labels))

    core.create_namespaced_pod(namespace, pod_body("fits", scheduler_name, gpus=2, labels=labels))

    cycle()

    assert core.read_namespaced_pod("ours", namespace).spec.node_name is None  # 8 - 6 < 4
    fits = core.read_namespaced_pod("fits", namespace)
    assert fits.spec.node_name == node  # the 2 GPUs the other pod left
    assert Pod.objects.get(name="ours").reason.endswith("didn't have enough resources: GPUs.")
    # Their pod is never ours: no binding, eviction or event touches it.
    assert not [e for e in core.list_namespaced_event(namespace).items if e.involved_object.name == "theirs"]
    row = Node.objects.get(name=node)
    assert (row.external_gpus, row.external_pods, row.gpus.count()) == (6, 1, 8)  # devices kept


def _bound_within(core: client.CoreV1Api, namespace: str, pod: str, cycles: int = 6) -> str | None:
    for _ in range(cycles):
        cycle()
        node = core.read_namespaced_pod(pod, namespace).spec.node_name
        if node:
            return str(node)
        time.sleep(0.5)
    return None


def test_a_pod_deleted_and_applied_again_under_the_same_name_is_bound(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    core = cluster.core
    nodes.kwok("gpu-1")
    body = pod_body("again", scheduler_name, gpus=1, labels={"kai.scheduler/queue": "team-a"})
    core.create_namespaced_pod(namespace, body)
    assert _bound_within(core, namespace, "again")
    core.delete_namespaced_pod("again", namespace)
    wait_until(lambda: not core.list_namespaced_pod(namespace).items, "KWOK to remove the deleted pod")
    cycle()

    core.create_namespaced_pod(namespace, body)

    assert _bound_within(core, namespace, "again"), "the re-created pod was never bound"
    # Two jobs of one key: the finished one keeps its pod, the new pod is a new job.
    first, second = Job.objects.filter(cluster_key=f"{namespace}/Pod/again").order_by("pk")
    assert first.state == "failed" and second.state in ("running", "pending")
    assert first.pods.get().uid != second.pods.get().uid


def test_the_job_controllers_replacement_for_a_failed_pod_is_bound(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    core, batch = cluster.core, cluster.batch
    nodes.kwok("gpu-1")
    job = _job_body("retry", scheduler_name, "team-a")
    job["spec"].update(completions=1, parallelism=1, backoffLimit=2)
    # No delay annotation and no Job completion stage would fire first: fail it by hand below.
    job["spec"]["template"]["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
    batch.create_namespaced_job(namespace, job)
    selector = "batch.kubernetes.io/job-name=retry"
    first = wait_until(lambda: core.list_namespaced_pod(namespace, label_selector=selector).items, "a pod")[0]
    assert _bound_within(core, namespace, first.metadata.name)
    wait_until(lambda: core.read_namespaced_pod(first.metadata.name, namespace).status.phase == "Running",
               "KWOK")  # fmt: skip
    # The container fails, as a kubelet would report it.
    core.patch_namespaced_pod_status(first.metadata.name, namespace, {"status": {"phase": "Failed"}})

    def replacement() -> list[Any]:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        return [p for p in pods if p.metadata.name != first.metadata.name]

    [second] = wait_until(replacement, "the Job controller's replacement pod")
    assert _bound_within(core, namespace, second.metadata.name), "the replacement pod was never bound"


@pytest.mark.parametrize(("gpus_per_pod", "bound"), [(3, 4), (5, 0)])
def test_a_jobs_batch_min_member_and_queue_on_the_job_make_a_gang_bound_whole_or_not_at_all(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    gpus_per_pod: int, bound: int,
) -> None:  # fmt: skip
    """KAI reads kai.scheduler/batch-min-member and the queue label from the pod's owner: with a minimum
    of 4, two 8-GPU nodes take four 3-GPU pods, but of four 5-GPU pods (room for two) none is bound."""
    core, batch = cluster.core, cluster.batch
    nodes.kwok("gpu-a")
    nodes.kwok("gpu-b")
    job = _job_body("gang", scheduler_name, "team-a")
    del job["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"]  # only the Job names it
    job["metadata"].update(labels={"kai.scheduler/queue": "team-a"},
                           annotations={"kai.scheduler/batch-min-member": "4"})  # fmt: skip
    job["spec"].update(completions=4, parallelism=4)
    [container] = job["spec"]["template"]["spec"]["containers"]
    container["resources"]["limits"]["nvidia.com/gpu"] = str(gpus_per_pod)
    job["spec"]["template"]["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
    batch.create_namespaced_job(namespace, job)
    selector = "batch.kubernetes.io/job-name=gang"
    wait_until(lambda: len(core.list_namespaced_pod(namespace, label_selector=selector).items) == 4,
               "the Job controller's 4 pods")  # fmt: skip

    for _ in range(3):
        cycle()

    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    assert sum(1 for p in pods if p.spec.node_name) == bound
    row = Job.objects.get(cluster_key=f"{namespace}/Job/gang")
    assert (row.queue.name, row.min_member, row.task_count) == ("team-a", 4, 4)


def test_a_deployments_pods_without_a_priority_class_are_inference(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI's default priority class by workload kind: Deployment pods are inference (125, non-preemptible)."""
    core = cluster.core
    nodes.kwok("gpu-1")
    pod = pod_body("unused", scheduler_name, gpus=1, labels={"app": "serve", "kai.scheduler/queue": "team-a"})
    pod["spec"]["restartPolicy"] = "Always"
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    client.AppsV1Api(cluster.api).create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serve"}},
                 "template": template}})  # fmt: skip
    [replica] = wait_until(lambda: core.list_namespaced_pod(namespace).items, "the Deployment's pod")

    assert _bound_within(core, namespace, replica.metadata.name)
    row = Pod.objects.get(name=replica.metadata.name).job
    assert (row.priority_class, row.priority) == ("inference", 125)


def test_a_pod_whose_node_was_deleted_is_never_bound_again(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI drops a node's pods with the node; the pod garbage collector deletes them later."""
    core = cluster.core
    doomed = nodes.kwok("doomed")
    core.create_namespaced_pod(namespace, pod_body("orphan", scheduler_name, gpus=1,
                                                   labels={"kai.scheduler/queue": "team-a"}))  # fmt: skip
    assert _bound_within(core, namespace, "orphan") == doomed
    nodes.kwok("spare")
    core.delete_node(doomed)

    for _ in range(3):
        cycle()

    events = core.list_namespaced_event(namespace).items
    assert sorted(e.reason for e in events if e.involved_object.name == "orphan") == ["Bound", "Scheduled"]
    assert core.read_namespaced_pod("orphan", namespace).spec.node_name == doomed


def _pending_reason(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    """The PodScheduled=False message the portal wrote on a waiting pod (as kube-scheduler does)."""
    read = core.read_namespaced_pod(pod, namespace)
    assert read.spec.node_name is None, f"{pod} was bound to {read.spec.node_name}"
    [condition] = [c for c in read.status.conditions or [] if c.type == "PodScheduled"]
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    return str(condition.message)


def test_a_tainted_gpu_node_takes_only_pods_that_tolerate_its_taint(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI runs kube-scheduler's TaintToleration filter: a NoSchedule taint keeps every pod that
    does not tolerate it off the node."""
    core = cluster.core
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    tainted = nodes.kwok("tainted", spec={"taints": [taint]})
    nodes.kwok("cpu-only", gpus=0)
    labels = {"kai.scheduler/queue": "team-a"}
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    core.create_namespaced_pod(namespace, pod_body("tolerates", scheduler_name, gpus=2, labels=labels,
                                                   tolerations=tolerations))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("intolerant", scheduler_name, gpus=2, labels=labels))

    cycle()

    assert core.read_namespaced_pod("tolerates", namespace).spec.node_name == tainted
    reason = _pending_reason(core, namespace, "intolerant")
    assert "1 node(s) had untolerated taint {dedicated: gpu}" in reason
    # The DefaultTolerationSeconds admission plugin adds its not-ready / unreachable ones after ours.
    assert Job.objects.get(cluster_key=f"{namespace}/Pod/tolerates").tolerations[0] == (
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})  # fmt: skip


def test_the_control_plane_node_and_its_taint_get_no_pods(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """A control-plane node carries node-role.kubernetes.io/control-plane:NoSchedule. CPU-only pods
    would prefer it (it has no GPUs); the taint keeps them on the worker."""
    core = cluster.core
    control = nodes.kwok("control-plane", gpus=0, labels={"node-role.kubernetes.io/control-plane": ""},
                         spec={"taints": [{"key": "node-role.kubernetes.io/control-plane",
                                           "effect": "NoSchedule"}]})  # fmt: skip
    worker = nodes.kwok("worker")
    labels = {"kai.scheduler/queue": "team-a"}
    for name in ("cpu-a", "cpu-b"):
        core.create_namespaced_pod(namespace, pod_body(name, scheduler_name, labels=labels,
                                                       requests={"cpu": "1"}))  # fmt: skip

    cycle()

    placed = {core.read_namespaced_pod(n, namespace).spec.node_name for n in ("cpu-a", "cpu-b")}
    assert placed == {worker}
    assert Node.objects.get(name=control).taints == [
        {"key": "node-role.kubernetes.io/control-plane", "value": "", "effect": "NoSchedule"}]  # fmt: skip


def test_a_pods_node_selector_and_required_affinity_keep_it_on_matching_nodes(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI runs kube-scheduler's NodeAffinity filter: nodeSelector and required node affinity."""
    core = cluster.core
    matching = nodes.kwok("x", labels={"accelerator": "x"})
    nodes.kwok("other", labels={"accelerator": "y"})
    labels = {"kai.scheduler/queue": "team-a"}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["x"]}]}]}}}  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("selector", scheduler_name, gpus=4, labels=labels,
                                                   nodeSelector={"accelerator": "x"}))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("affinity", scheduler_name, gpus=4, labels=labels,
                                                   affinity=affinity))  # fmt: skip
    cycle()
    # x is full now; the other node is empty but does not match.
    core.create_namespaced_pod(namespace, pod_body("no-room", scheduler_name, gpus=1, labels=labels,
                                                   nodeSelector={"accelerator": "x"}))  # fmt: skip

    cycle()

    for name in ("selector", "affinity"):
        assert core.read_namespaced_pod(name, namespace).spec.node_name == matching
    reason = _pending_reason(core, namespace, "no-room")
    assert "1 node(s) didn't match Pod's node affinity/selector" in reason


def test_a_nodes_max_pods_is_respected(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """A node takes no more pods than its allocatable pods (the kubelet's maxPods), other
    schedulers' pods included."""
    core = cluster.core
    small = nodes.kwok("small", pods=3)
    core.create_namespaced_pod(namespace, pod_body("theirs", "default-scheduler", nodeName=small))
    labels = {"kai.scheduler/queue": "team-a"}
    for i in range(3):
        core.create_namespaced_pod(namespace, pod_body(f"p-{i}", scheduler_name, gpus=1, labels=labels))

    cycle()

    bound = [i for i in range(3) if core.read_namespaced_pod(f"p-{i}", namespace).spec.node_name == small]
    assert len(bound) == 2  # 3 slots, one taken by their pod
    [waiting] = {0, 1, 2} - set(bound)
    assert "pod number exceeded" in _pending_reason(core, namespace, f"p-{waiting}")


def test_a_gang_whose_pods_appear_over_cycles_waits_for_its_minimum_then_binds_whole(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI: a PodGroup is not ready for scheduling until minMember pods exist; a gang of 4 whose
    first 2 pods fit is never bound 2 of 4."""
    core = cluster.core
    nodes.kwok("gpu-a")
    nodes.kwok("gpu-b")
    labels = {"kai.scheduler/queue": "team-a"}
    annotations = {"pod-group-name": "gang", "kai.scheduler/batch-min-member": "4"}

    def create(name: str) -> None:
        core.create_namespaced_pod(namespace, pod_body(name, scheduler_name, gpus=3, labels=labels,
                                                       annotations=annotations))  # fmt: skip

    create("gang-0")
    create("gang-1")
    cycle()
    cycle()

    assert "Waiting for 4 pods, currently 2 exist" in _pending_reason(core, namespace, "gang-0")
    assert core.read_namespaced_pod("gang-1", namespace).spec.node_name is None
    row = Job.objects.get(cluster_key=f"{namespace}/PodGroup/gang")
    assert (row.min_member, row.task_count, row.state) == (4, 4, "pending")

    create("gang-2")
    create("gang-3")
    cycle()

    placed = [core.read_namespaced_pod(f"gang-{i}", namespace).spec.node_name for i in range(4)]
    assert all(placed), placed


def test_preferred_node_affinity_picks_the_preferred_node_among_those_that_fit(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI scores Kubernetes' preferred node affinity above its own resource scores (binpack would
    otherwise pick the busier node)."""
    core = cluster.core
    busy = nodes.kwok("busy")
    preferred = nodes.kwok("preferred", labels={"rack": "a"})
    labels = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("first", scheduler_name, gpus=4, labels=labels,
                                                   nodeName=busy))  # fmt: skip
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "rack", "operator": "In",
                                                            "values": ["a"]}]}}]}}  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("prefers", scheduler_name, gpus=2, labels=labels,
                                                   affinity=affinity))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("packs", scheduler_name, gpus=2, labels=labels))

    cycle()

    assert core.read_namespaced_pod("prefers", namespace).spec.node_name == preferred
    assert core.read_namespaced_pod("packs", namespace).spec.node_name == busy  # binpack, no preference


def test_a_pod_labelled_for_a_node_pool_runs_only_there_and_only_from_a_queue_of_that_pool(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI's node pools are scheduling shards: a pod labelled kai.scheduler/node-pool=training is
    scheduled by the training shard, on its nodes, for a queue of that shard."""
    core = cluster.core
    nodes.kwok("default-node")
    training = nodes.kwok("training-node", labels={"kai.scheduler/node-pool": "training"})
    cycle()  # the training pool appears with its node
    pool = NodePool.objects.get(name="training")
    factories.queue("train-q", node_pool=pool, gpu_quota=8)
    both = {"kai.scheduler/queue": "train-q", "kai.scheduler/node-pool": "training"}
    wrong = {"kai.scheduler/queue": "team-a", "kai.scheduler/node-pool": "training"}
    core.create_namespaced_pod(namespace, pod_body("trains", scheduler_name, gpus=2, labels=both))
    core.create_namespaced_pod(namespace, pod_body("misfiled", scheduler_name, gpus=2, labels=wrong))

    cycle()

    assert core.read_namespaced_pod("trains", namespace).spec.node_name == training
    assert "team-a" in _pending_reason(core, namespace, "misfiled")
