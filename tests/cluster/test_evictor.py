"""The evictor against the real API server: evictions through the Eviction API, KAI's Evict event and
its DisruptionTarget condition (backends/kubernetes/evictor.py)."""

from __future__ import annotations

from kubernetes import client

from kai_portal.cluster.backends import Evict, TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, pod_body


def _events(cluster: Cluster, namespace: str) -> list[client.CoreV1Event]:
    return list(cluster.core.list_namespaced_event(namespace).items)


def test_evict_goes_through_the_eviction_api_and_writes_an_evict_event(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    # No kubelet serves this node, so the evicted pod stays Terminating (Releasing).
    node = nodes.make("silent")
    cluster.core.create_namespaced_pod(namespace, pod_body("victim", scheduler_name, nodeName=node))
    backend.observe()
    message = f"Pod {namespace}/victim was preempted by higher priority workload team-b/pg-big"

    report = backend.apply([], [
        Evict(namespace, "victim", message, action="preempt", evictor_namespace="team-b",
              evictor_job="pg-big"),
        Evict(namespace, "missing", "whatever"),
    ], [])  # fmt: skip

    assert [(r.operation, r.name, r.ok) for r in report.results][:2] == [
        ("evict", "victim", True), ("event", report.results[1].name, True)]  # fmt: skip
    assert report.of("evict")[1].status_code == 404
    victim = cluster.core.read_namespaced_pod("victim", namespace)
    assert victim.metadata.deletion_timestamp is not None
    # The eviction API marks the pod the way the KAI docs describe (DisruptionTarget).
    assert any(c.type == "DisruptionTarget" and c.status == "True" for c in victim.status.conditions or [])
    [event] = [e for e in _events(cluster, namespace) if e.reason == "Evict"]
    assert (event.type, event.message, event.involved_object.name) == ("Normal", message, "victim")
    assert event.metadata.annotations == {
        "num-evicted-pods": "1", "evictor-action-type": "preempt",
        "evictor-pod-group-name": "pg-big", "evictor-pod-group-namespace": "team-b"}  # fmt: skip
    assert backend.observe().pods[namespace, "victim"].status is TaskStatus.RELEASING


def test_an_evicted_pod_carries_kais_disruption_target_condition(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    """KAI's evictor marks the victim DisruptionTarget=True, reason PreemptionByScheduler, with the
    eviction message (the Eviction API alone would say EvictionByEvictionAPI, "Eviction API: evicting")."""
    node = nodes.make("silent")  # no kubelet: the evicted pod stays Terminating, so its status can be read
    cluster.core.create_namespaced_pod(namespace, pod_body("victim", scheduler_name, nodeName=node))
    backend.observe()
    message = f"Pod {namespace}/victim was preempted by higher priority workload team-b/pg-big"

    assert backend.apply([], [Evict(namespace, "victim", message, action="preempt")], []).ok

    victim = cluster.core.read_namespaced_pod("victim", namespace)
    assert victim.metadata.deletion_timestamp is not None
    [condition] = [c for c in victim.status.conditions if c.type == "DisruptionTarget"]
    assert (condition.status, condition.reason) == ("True", "PreemptionByScheduler")
    assert condition.message == message
