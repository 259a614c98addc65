"""The cluster cache (observe()) against the real API server: parsing nodes and pods, following
watches, 410 Gone (backends/kubernetes/cache.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends import TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, pod_body, wait_until


@pytest.fixture
def priority_class(cluster: Cluster, nodes: Nodes) -> Iterator[str]:
    """A PriorityClass (the Priority admission plugin refuses pods naming a missing one)."""
    name = nodes.name("train")
    scheduling = client.SchedulingV1Api(cluster.api)
    body = client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=50)
    scheduling.create_priority_class(body)
    yield name
    scheduling.delete_priority_class(name)


def test_node_labels_and_allocatable_are_parsed(nodes: Nodes, backend: KubernetesBackend) -> None:
    gpu = nodes.make("gpu", gpus=8, labels={
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "kai.scheduler/node-pool": "training",
    })  # fmt: skip
    in_bytes = nodes.make("gpu-bytes", labels={"nvidia.com/gpu.memory": str(40 * 2**30 + 12345)},
                          spec={"unschedulable": True})  # fmt: skip
    cpu = nodes.make("cpu", gpus=0, conditions=[{"type": "Ready", "status": "False"},
                                                {"type": "MemoryPressure", "status": "True"}])  # fmt: skip

    observed = backend.observe().nodes

    node = observed[gpu]
    assert (node.pool, node.gpu_count, node.gpu_product) == ("training", 8, "NVIDIA-H100-80GB-HBM3")
    assert node.gpu_memory_mib == 81500  # rounded down to 100 MiB
    assert (node.cpu_millis, node.memory_mib, node.max_pods) == (64000, 512 * 1024, 110)
    assert node.schedulable and node.resource_version
    assert observed[in_bytes].gpu_memory_mib == 40900  # bytes converted to MiB, then rounded
    assert observed[in_bytes].unschedulable and not observed[in_bytes].schedulable
    assert observed[cpu].gpu_memory_mib is None and observed[cpu].gpu_count == 0
    assert not observed[cpu].ready and observed[cpu].pressure_conditions == ("MemoryPressure",)


def test_pod_labels_annotations_quantities_and_states_are_parsed(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend,
    priority_class: str,
) -> None:  # fmt: skip
    core, ours = cluster.core, scheduler_name
    kwok_node, silent_node = nodes.kwok("kwok"), nodes.make("silent")

    def create(name: str, scheduler: str = ours, **kw: Any) -> None:
        core.create_namespaced_pod(namespace, pod_body(name, scheduler, **kw))

    create("frac", labels={"kai.scheduler/queue": "team-a", "priorityClassName": "inference",
                           "kai.scheduler/preemptibility": "non-preemptible"},
           annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2", "pod-group-name": "pg-train"},
           requests={"cpu": "1500m", "memory": "2Gi"})  # fmt: skip
    create("legacy", labels={"runai/queue": "old-team"}, annotations={"gpu-memory": "20000"},
           priorityClassName=priority_class)  # fmt: skip
    create("bad-fraction", annotations={"gpu-fraction": "1.5"}, gpus=2,
           labels={"kai.scheduler/preemptibility": "sometimes"})  # fmt: skip
    # A pod owned by a real (suspended, so pod-less) Job: the garbage collector
    # deletes pods whose owner does not exist.
    owner = cluster.batch.create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train-42"},
        "spec": {"suspend": True, "template": {"spec": pod_body("x", ours)["spec"]}}})  # fmt: skip
    owned = pod_body("owned", ours)
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train-42",
                                             "uid": owner.metadata.uid, "controller": True}]  # fmt: skip
    core.create_namespaced_pod(namespace, owned)
    create("running", nodeName=kwok_node)  # KWOK runs it
    create("bound", nodeName=silent_node)  # no kubelet answers: stays Pending on its node
    create("leaving", nodeName=silent_node)
    core.delete_namespaced_pod("leaving", namespace)  # graceful: waits for a kubelet that never comes
    create("gated", schedulingGates=[{"name": "wait"}])
    create("other-scheduler", scheduler="default-scheduler")
    wait_until(lambda: core.read_namespaced_pod("running", namespace).status.phase == "Running", "KWOK")

    pods = backend.observe().pods

    frac = pods[namespace, "frac"]
    assert (frac.queue, frac.priority_class) == ("team-a", "inference")
    assert frac.preemptibility == "non-preemptible"
    assert (frac.gpu.fraction, frac.gpu.num_devices, frac.gpu.whole) == (0.5, 2, 0)
    assert (frac.job.kind, frac.job.name) == ("PodGroup", "pg-train")
    assert (frac.cpu_millis, frac.memory_mib) == (1500, 2048)
    assert frac.status is TaskStatus.PENDING and frac.created_at is not None and frac.uid
    legacy = pods[namespace, "legacy"]
    # KAI's default queue label only: the legacy runai/queue is read when configured (test_queue_label.py).
    assert (legacy.queue, legacy.gpu.memory_mib, legacy.priority_class) == (None, 20000, priority_class)
    bad = pods[namespace, "bad-fraction"]
    assert (bad.gpu.fraction, bad.gpu.whole, bad.queue, bad.preemptibility) == (None, 2, None, None)
    assert (bad.job.kind, bad.job.name) == ("Pod", "bad-fraction")
    assert (pods[namespace, "owned"].job.kind, pods[namespace, "owned"].job.name) == ("Job", "train-42")
    assert pods[namespace, "leaving"].status is TaskStatus.RELEASING
    assert pods[namespace, "leaving"].deletion_timestamp is not None
    assert pods[namespace, "running"].status is TaskStatus.RUNNING
    assert pods[namespace, "bound"].status is TaskStatus.BOUND
    assert pods[namespace, "gated"].status is TaskStatus.GATED
    assert (namespace, "other-scheduler") not in pods


class _Recorder:
    """Wraps a client list method to record the arguments of each call (list or watch)."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self.call = call
        self.calls: list[dict[str, Any]] = []
        self.__doc__ = call.__doc__  # kubernetes.watch reads the docstring to find the return type

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.call(*args, **kwargs)


def test_second_observe_follows_a_watch_instead_of_relisting(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    pods, node_calls = _Recorder(backend.core.list_pod_for_all_namespaces), _Recorder(backend.core.list_node)
    monkeypatch.setattr(backend.core, "list_pod_for_all_namespaces", pods)
    monkeypatch.setattr(backend.core, "list_node", node_calls)
    core = cluster.core
    first_node = nodes.make("gpu-1")
    core.create_namespaced_pod(namespace, pod_body("first", scheduler_name))
    first = backend.observe()
    core.create_namespaced_pod(namespace, pod_body("second", scheduler_name))
    second_node = nodes.make("gpu-2")
    core.delete_namespaced_pod("first", namespace)  # unbound: gone at once

    second = backend.observe()

    assert set(second.pods) == {(namespace, "second")}
    assert {first_node, second_node} <= set(second.nodes)
    assert [c.get("watch") for c in pods.calls] == [None, True]  # one list, then one watch
    # Every pod, not only ours: other schedulers' pods hold room on their nodes (issue 16).
    assert "field_selector" not in pods.calls[0] and "field_selector" not in pods.calls[1]
    assert pods.calls[1]["resource_version"] == first.pod_resource_version
    assert [c.get("watch") for c in node_calls.calls] == [None, True]
    assert int(second.pod_resource_version or 0) > int(first.pod_resource_version or 0)



def test_taints_and_a_pods_placement_rules_are_parsed(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    """What KAI's predicates read: node taints, the pod's tolerations, nodeSelector, node affinity
    (required and preferred) and KAI's node-pool label on the pod."""
    tainted = nodes.make("tainted", spec={"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "spot", "effect": "PreferNoSchedule"}]})  # fmt: skip
    affinity = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [tainted]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 20,
             "preference": {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}}]}}  # fmt: skip
    cluster.core.create_namespaced_pod(namespace, pod_body(
        "rules", scheduler_name, labels={"kai.scheduler/node-pool": "training"},
        nodeSelector={"disk": "ssd"}, affinity=affinity,
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                     {"key": "spot", "value": "yes"}]))  # fmt: skip

    state = backend.observe()

    node = state.nodes[tainted]
    assert [(t.key, t.value, t.effect) for t in node.taints] == [
        ("nvidia.com/gpu", "present", "NoSchedule"), ("spot", "", "PreferNoSchedule")]  # fmt: skip
    pod = state.pods[namespace, "rules"]
    assert pod.node_selector == {"disk": "ssd", "kai.scheduler/node-pool": "training"}
    # The DefaultTolerationSeconds admission plugin adds its not-ready / unreachable ones after ours.
    assert pod.tolerations[:2] == (
        {"key": "nvidia.com/gpu", "operator": "Exists", "value": "", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Equal", "value": "yes", "effect": ""})  # fmt: skip
    assert pod.node_affinity == {
        "required": [[{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                     [{"key": "kubernetes.io/hostname", "operator": "In", "values": [tainted]}]],
        "preferred": [{"weight": 20,
                       "expressions": [{"key": "rack", "operator": "Exists", "values": []}]}]}  # fmt: skip


def test_other_schedulers_pods_are_charged_to_their_nodes_and_nothing_else_is_kept(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    """KAI charges every bound, unfinished pod on a node to it, whichever scheduler placed it."""
    core = cluster.core
    node = nodes.kwok("shared")
    empty = nodes.kwok("empty")
    requests = {"cpu": "1500m", "memory": "1Gi"}
    core.create_namespaced_pod(namespace, pod_body("theirs", "default-scheduler", gpus=3, requests=requests,
                                                   nodeName=node))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("daemon", "default-scheduler", requests={"cpu": "100m"},
                                                   nodeName=node))  # fmt: skip
    core.create_namespaced_pod(namespace, pod_body("waiting", "default-scheduler", gpus=8))  # never bound
    core.create_namespaced_pod(namespace, pod_body("done", "default-scheduler", gpus=8, nodeName=empty))
    backend.observe()
    core.patch_namespaced_pod_status("done", namespace, {"status": {"phase": "Succeeded"}})

    def usage() -> Any:
        held = backend.observe().external
        return held if held.get(node) and held[node].pods == 2 and empty not in held else None

    held = wait_until(usage, "the watch to show both bound pods and the finished one gone")

    mine = held[node]
    assert (mine.gpus, mine.cpu_millis, mine.memory_mib, mine.pods) == (3, 1600, 1024, 2)
    assert not any(key[0] == namespace for key in backend.observe().pods)  # never ours to bind or evict
    core.delete_namespaced_pod("theirs", namespace, grace_period_seconds=0)
    wait_until(lambda: backend.observe().external[node].pods == 1, "the deleted pod to free its room")
    assert backend.observe().external[node].gpus == 0
