"""Status like KAI (issue 16): what the portal's cycles leave on pods and in Events on a real API server
(backends/kubernetes/status.py).

KAI's recorder aggregates Events the way client-go does: one Event object per pod per distinct
(type, reason, message), a repeat bumps ``count`` and ``lastTimestamp``. A pending pod explained
as Unschedulable gets ``PodScheduled=False``. (Evicted pods' ``DisruptionTarget``: test_evictor.py.)
"""

from __future__ import annotations

from collections import Counter

import pytest
from kubernetes import client

from kai_portal.cluster.backends import EventType, PodEvent
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.workloads import configured_backend

from .conftest import Cluster, Nodes, cycle, pod_body

pytestmark = pytest.mark.django_db


def _events(cluster: Cluster, namespace: str) -> list[client.CoreV1Event]:
    return list(cluster.core.list_namespaced_event(namespace).items)


def test_100_pending_pods_over_10_cycles_write_at_most_100_events(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI (client-go's event aggregation): one Event per pod per distinct message, repeats bump count."""
    core = cluster.core
    nodes.kwok("gpu-1")
    labels = {"kai.scheduler/queue": "team-a"}
    for i in range(100):
        core.create_namespaced_pod(namespace, pod_body(f"wait-{i}", scheduler_name, gpus=16, labels=labels))

    for _ in range(10):
        cycle()

    everything = _events(cluster, namespace)
    # Where the PodGroup CRD exists each pod's job has its PodGroup (pod_groups.py), and KAI writes
    # the job's message there too: one aggregated Event per group, as for the pods.
    groups = [e for e in everything if e.involved_object.kind == "PodGroup"]
    assert len(groups) in (0, 100) and {(e.reason, e.type, e.count) for e in groups} <= {
        ("Unschedulable", "Normal", 10)}  # fmt: skip
    events = [e for e in everything if e.involved_object.kind == "Pod"]
    assert len(events) <= 100, Counter((e.involved_object.kind, e.reason) for e in events)
    per_pod = Counter(e.involved_object.name for e in events if e.involved_object.kind == "Pod")
    assert set(per_pod) == {f"wait-{i}" for i in range(100)} and set(per_pod.values()) == {1}
    assert {(e.reason, e.type, e.count) for e in events} == {("Unschedulable", "Warning", 10)}
    pods = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
    assert all(e.involved_object.uid == pods[e.involved_object.name] for e in events)


def test_a_restarted_worker_bumps_the_events_the_last_one_wrote(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """client-go aggregation survives a restart: the same (pod uid, reason, message) is the same Event
    object (a deterministic name; create answers 409 and the count is bumped), not a new one."""
    core = cluster.core
    nodes.kwok("gpu-1")
    labels = {"kai.scheduler/queue": "team-a"}
    for name in ("a", "b"):
        core.create_namespaced_pod(namespace, pod_body(name, scheduler_name, gpus=16, labels=labels))
    for _ in range(2):
        cycle()

    # A new worker: a new backend, no cache.
    monkeypatch.setattr(configured_backend, "_kubernetes_backend", None)
    restarted = configured_backend.get_backend()
    assert restarted is not portal
    for _ in range(3):
        cycle()
    restarted.api_client.close()

    events = [e for e in _events(cluster, namespace) if e.involved_object.kind == "Pod"]
    assert sorted((e.involved_object.name, e.reason, e.count) for e in events) == [
        ("a", "Unschedulable", 5), ("b", "Unschedulable", 5)]  # fmt: skip
    assert all(e.last_timestamp >= e.first_timestamp for e in events)


def test_pods_grouped_by_a_podgroup_get_one_podgroup_event_per_message(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:  # fmt: skip
    """KAI writes the job's message on its PodGroup (Normal, Unschedulable) and each pod's on the pod."""
    core = cluster.core
    nodes.kwok("gpu-1")
    for i in range(3):
        body = pod_body(f"member-{i}", scheduler_name, gpus=16, labels={"kai.scheduler/queue": "team-a"},
                        annotations={"pod-group-name": "pg-train"})  # fmt: skip
        core.create_namespaced_pod(namespace, body)
    for _ in range(3):
        cycle()

    events = _events(cluster, namespace)
    kinds = Counter((e.involved_object.kind, e.involved_object.name, e.count) for e in events)
    assert kinds == {("PodGroup", "pg-train", 3): 1, **{("Pod", f"member-{i}", 3): 1 for i in range(3)}}
    [group] = [e for e in events if e.involved_object.kind == "PodGroup"]
    assert (group.type, group.reason, group.involved_object.api_version) == (
        "Normal", "Unschedulable", "scheduling.run.ai/v2alpha2")  # fmt: skip


def test_repeats_are_rate_limited_per_pod_and_reason_and_the_scheduled_event_still_comes(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """client-go's spam filter (a burst, then one per five minutes; here a burst of 3) caps the
    writes a long-pending pod costs; its bucket is per reason, so binding it still says so."""
    from kai_portal.cluster.backends.kubernetes.status import EventSpamFilter

    portal.status.event_filter = EventSpamFilter(burst=3, refill_seconds=3600)
    core = cluster.core
    nodes.kwok("gpu-1")
    labels = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("waits", scheduler_name, gpus=16, labels=labels))
    for _ in range(5):
        cycle()
    events = [e for e in _events(cluster, namespace) if e.involved_object.kind == "Pod"]
    assert [(e.reason, e.count) for e in events] == [("Unschedulable", 3)]

    core.delete_namespaced_pod("waits", namespace, grace_period_seconds=0)
    core.create_namespaced_pod(namespace, pod_body("fits", scheduler_name, gpus=1, labels=labels))
    cycle()
    reasons = {(e.involved_object.name, e.reason) for e in _events(cluster, namespace)}
    assert ("fits", "Scheduled") in reasons


def test_repeated_events_bump_the_count_instead_of_piling_up(
    cluster: Cluster, namespace: str, scheduler_name: str, backend: KubernetesBackend
) -> None:
    text = "no nodes with enough resources were found: 3 node(s) didn't have enough resources: GPUs."
    member = pod_body("p1", scheduler_name, annotations={"pod-group-name": "pg-1"})
    cluster.core.create_namespaced_pod(namespace, member)
    backend.observe()
    waiting = PodEvent(namespace, "p1", EventType.WARNING, "Unschedulable", text)
    group = PodEvent(namespace, "pg-1", EventType.NORMAL, "Unschedulable", "Unable to schedule podgroup",
                     kind="PodGroup")  # fmt: skip
    # A group no pod of ours belongs to has no PodGroup object for an event to be about.
    nobody = PodEvent(namespace, "pg-none", EventType.NORMAL, "Unschedulable", "x", kind="PodGroup")

    assert backend.apply([], [], [waiting, group, nobody]).ok
    assert backend.apply([], [], [waiting]).ok

    events = {e.involved_object.kind: e for e in _events(cluster, namespace)}
    assert {(k, e.involved_object.api_version, e.type, e.count) for k, e in events.items()} == {
        ("Pod", "v1", "Warning", 2), ("PodGroup", "scheduling.run.ai/v2alpha2", "Normal", 1)}  # fmt: skip
    assert len(_events(cluster, namespace)) == 2
    assert events["Pod"].last_timestamp >= events["Pod"].first_timestamp


def test_an_unschedulable_pending_pod_gets_pod_scheduled_false_once_per_message(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    core = cluster.core
    core.create_namespaced_pod(namespace, pod_body("waiting", scheduler_name, gpus=16))
    core.create_namespaced_pod(namespace, pod_body("placed", scheduler_name, nodeName=nodes.make("gpu-1")))
    backend.observe()
    first = "no nodes with enough resources were found: 1 node(s) didn't have enough resources: GPUs."

    def explain(pod: str, message: str) -> PodEvent:
        return PodEvent(namespace, pod, EventType.WARNING, "Unschedulable", message)

    report = backend.apply([], [], [explain("waiting", first), explain("placed", first)])

    assert [(r.operation, r.name) for r in report.results if r.operation == "condition"] == [
        ("condition", "waiting")]  # a bound pod's condition is not ours to change
    assert report.ok
    pod = core.read_namespaced_pod("waiting", namespace)
    [condition] = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert (condition.status, condition.reason, condition.message) == ("False", "Unschedulable", first)

    backend.apply([], [], [explain("waiting", first)])
    assert core.read_namespaced_pod("waiting", namespace).metadata.resource_version == (
        pod.metadata.resource_version)  # the same words: no write

    second = "Unable to schedule podgroup: queue team-a is over its GPU limit"
    backend.apply([], [], [explain("waiting", second)])
    conditions = core.read_namespaced_pod("waiting", namespace).status.conditions
    assert [(c.type, c.message) for c in conditions if c.type == "PodScheduled"] == [("PodScheduled", second)]
