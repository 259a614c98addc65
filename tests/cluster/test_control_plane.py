"""The test bed itself: kubectl against the API server, KWOK's nodes and pods, the shipped RBAC."""

from __future__ import annotations

import json
import time

from kubernetes import client

from .conftest import PORTAL_ACCOUNT, PORTAL_NAMESPACE, Cluster, Nodes, pod_body, wait_until


def _bind(cluster: Cluster, namespace: str, pod: str, node: str) -> None:
    target = client.V1ObjectReference(api_version="v1", kind="Node", name=node)
    body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod), target=target)
    cluster.core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)


def _phase(cluster: Cluster, namespace: str, pod: str) -> str:
    return str(cluster.core.read_namespaced_pod(pod, namespace).status.phase)


def test_kubectl_talks_to_a_real_api_server_with_rbac(cluster: Cluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json"))["serverVersion"]
    assert version["gitVersion"].startswith("v1.")
    assert int(version["minor"].rstrip("+")) >= 35
    resources = cluster.kubectl("api-resources", "-o", "name")
    assert "pods" in resources.split() and "clusterroles.rbac.authorization.k8s.io" in resources.split()
    # RBAC is on: an anonymous-looking identity with no bindings is refused.
    assert not cluster.can_i("list", "pods", user="someone")


def test_the_shipped_rbac_gives_the_portal_what_it_calls_and_nothing_else(
    cluster: Cluster, portal_kubeconfig: object
) -> None:
    account = f"system:serviceaccount:{PORTAL_NAMESPACE}:{PORTAL_ACCOUNT}"

    allowed = [("watch", "nodes", ""), ("list", "pods", ""), ("create", "pods", "binding"),
               ("create", "pods", "eviction"), ("create", "events", ""), ("patch", "events", ""),
               ("create", "pods", ""), ("delete", "pods", ""), ("patch", "pods", "status"),
               ("get", "jobs", "")]  # fmt: skip
    refused = [("delete", "nodes", ""), ("patch", "nodes", ""), ("get", "secrets", ""),
               ("update", "pods", ""), ("create", "deployments", ""), ("list", "jobs", ""),
               ("update", "pods", "status")]  # fmt: skip
    for verb, resource, sub in allowed:
        assert cluster.can_i(verb, resource, subresource=sub, user=account, namespace="x"), (verb, resource)
    for verb, resource, sub in refused:
        assert not cluster.can_i(verb, resource, subresource=sub, user=account, namespace="x"), (
            verb, resource, sub)


def test_kwok_runs_a_bound_pod_and_completes_one_annotated_with_a_delay(
    cluster: Cluster, namespace: str, nodes: Nodes
) -> None:
    node = nodes.kwok("kwok-1")
    core = cluster.core
    core.create_namespaced_pod(namespace, pod_body("server", "nobody"))
    core.create_namespaced_pod(namespace, pod_body(
        "batch", "nobody", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "2s"}))  # fmt: skip

    _bind(cluster, namespace, "server", node)
    bound_at = time.monotonic()
    _bind(cluster, namespace, "batch", node)

    wait_until(lambda: _phase(cluster, namespace, "server") == "Running", "KWOK to run the bound pod")
    wait_until(lambda: _phase(cluster, namespace, "batch") == "Succeeded", "the annotated pod to complete")
    assert time.monotonic() - bound_at >= 2
    assert _phase(cluster, namespace, "server") == "Running"
    assert core.read_node(node).status.node_info.kubelet_version.startswith("kwok")


def test_a_pod_on_a_node_kwok_does_not_manage_stays_pending(
    cluster: Cluster, namespace: str, nodes: Nodes
) -> None:
    node = nodes.make("plain")
    cluster.core.create_namespaced_pod(namespace, pod_body("p", "nobody"))
    _bind(cluster, namespace, "p", node)
    time.sleep(2)
    assert _phase(cluster, namespace, "p") == "Pending"


def test_the_job_controller_makes_pods_that_stay_unbound_without_a_scheduler(
    cluster: Cluster, namespace: str
) -> None:
    template = {"spec": pod_body("x", "kai-nobody")["spec"]}
    cluster.batch.create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"completions": 2, "parallelism": 2, "template": template}})  # fmt: skip
    pods = wait_until(lambda: cluster.core.list_namespaced_pod(namespace).items, "the Job controller's pods")
    assert all(p.spec.scheduler_name == "kai-nobody" and not p.spec.node_name for p in pods)
