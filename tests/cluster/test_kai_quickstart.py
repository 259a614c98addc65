"""KAI Scheduler's quickstart and doc examples, applied unchanged, scheduled by the portal.

A KAI user switching to the portal keeps their manifests: KAI's ``docs/quickstart`` queues and
pods, ``docs/batch`` and ``docs/priority`` examples, read from KAI's repository (the mirror, see
``tests/kai_examples.py``) and applied with the admin's kubectl as KAI's README says
(``kubectl apply -f``; only the namespace is chosen, with ``-n``, as KAI asks for a dedicated
one). The pods name ``schedulerName: kai-scheduler``, so here the portal runs as the scheduler
``kai-scheduler`` (``scheduler_name`` is parametrized, as in ``test_gpu_sharing.py``); other
tests use a name of their own, so none of them sees these pods. KAI's queues are cluster-wide
objects with fixed names: they are deleted after each test (a cluster that already has them,
``KUBECONFIG_TEST`` pointing at a KAI install, skips). The Queue CRD is KAI's own.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job, Pod
from tests.kai_examples import kai_file

from .conftest import KWOK_ANNOTATION, Cluster, Nodes, _has_default_account, cycle, wait_until

pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("scheduler_name", ["kai-scheduler"])]

KAI_QUEUE_CRD = "deployments/kai-scheduler/crds/scheduling.run.ai_queues.yaml"
QUICKSTART = "docs/quickstart"


@pytest.fixture(scope="module")
def kai_queue_crd(cluster: Cluster) -> None:
    """KAI's Queue CRD, as a cluster set up for KAI has it (same field manager as the other tests)."""
    cluster.kubectl("apply", "--server-side", "--field-manager=kai-portal-test", "--force-conflicts",
                    "-f", "-", stdin=kai_file(KAI_QUEUE_CRD))  # fmt: skip
    cluster.kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/queues.scheduling.run.ai")


@pytest.fixture
def kai_queues(cluster: Cluster, kai_queue_crd: None) -> Iterator[Callable[[str], list[str]]]:
    """``apply(path)``: KAI's Queue file applied unchanged; every queue applied is deleted after."""
    made: list[str] = []
    existing = set(cluster.kubectl("get", "queues", "-o", "name").split())

    def apply(path: str) -> list[str]:
        text = kai_file(path)
        names = [d["metadata"]["name"] for d in yaml.safe_load_all(text) if d]
        if any(f"queue.scheduling.run.ai/{n}" in existing for n in names):
            pytest.skip(f"the cluster already has a queue of {path} (not the test's to change)")
        made.extend(names)
        cluster.kubectl("apply", "-f", "-", stdin=text)
        return names

    yield apply
    if made:  # children first is not needed: the API server deletes each object on its own
        cluster.kubectl("delete", "queue", *made, "--ignore-not-found", "--wait=true")


@pytest.fixture
def second_namespace(cluster: Cluster, namespace: str) -> Iterator[str]:
    """Another user's namespace, where the same KAI example is applied again."""
    name = f"{namespace[:50]}-{secrets.token_hex(2)}"
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_until(lambda: _has_default_account(cluster.core, name), f"the default ServiceAccount in {name}")
    yield name
    cluster.core.delete_namespace(name, propagation_policy="Background")


def apply_example(
    cluster: Cluster, namespace: str, path: str, edit: Callable[[str], str] | None = None
) -> None:
    """``kubectl apply -n NAMESPACE -f`` one of KAI's example files (unchanged unless ``edit``)."""
    text = kai_file(path)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=edit(text) if edit else text)


def events(cluster: Cluster, namespace: str, reason: str) -> dict[str, list[str]]:
    """Pod name -> messages of the events with ``reason`` in ``namespace``."""
    out: dict[str, list[str]] = {}
    for event in cluster.core.list_namespaced_event(namespace).items:
        if event.reason == reason:
            out.setdefault(event.involved_object.name, []).append(event.message)
    return out


def readme_node(cluster: Cluster, nodes: Nodes, base: str) -> str:
    """A GPU node made as README's "Watching the portal schedule a real API server" makes it (not
    ``nodes.kwok``, which takes the admission's not-ready taint off itself): the test bed's
    node-lifecycle-controller must take it off once KWOK reports the node Ready, as in a cluster."""
    name = nodes.name(base)
    resources = {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"}
    cluster.core.create_node({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"}},
        "status": {"allocatable": resources, "capacity": resources}})  # fmt: skip
    nodes.made.append(name)  # deleted after the test

    def ready_and_untainted() -> bool:
        node = cluster.core.read_node(name)
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        return ready and not node.spec.taints

    wait_until(ready_and_untainted, f"node {name} Ready without the not-ready taint", timeout=60, every=0.5)
    return name


def condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def test_kai_quickstart_queues_and_pods_applied_unchanged_become_portal_queues_and_running_pods(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]],
) -> None:  # fmt: skip
    """KAI's quickstart: default-queues.yaml, then gpu-pod.yaml and cpu-only-pod.yaml. KAI shows the
    queues at once and binds both pods (Scheduled: "Successfully assigned pod ns/name to node N at
    node-pool default", PodScheduled=True); the portal must do the same within its cycles."""
    core = cluster.core
    node = readme_node(cluster, nodes, "quickstart")
    names = kai_queues(f"{QUICKSTART}/default-queues.yaml")
    assert names == ["default-parent-queue", "default-queue"]
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/gpu-pod.yaml")
    apply_example(cluster, namespace, f"{QUICKSTART}/pods/cpu-only-pod.yaml")
    pods = ("gpu-pod", "cpu-only-pod")

    def running() -> bool:
        cycle()
        return all(core.read_namespaced_pod(p, namespace).status.phase == "Running" for p in pods)

    wait_until(running, "the portal to bind KAI's quickstart pods and KWOK to run them", timeout=90,
               every=0.5)  # fmt: skip

    # The queues are portal queues with KAI's values (quota 0, limit -1, weight 1 for each resource).
    rows = {q.name: q for q in Queue.objects.filter(name__in=names).select_related("parent")}
    assert set(rows) == set(names)
    leaf = rows["default-queue"]
    assert leaf.parent == rows["default-parent-queue"] and rows["default-parent-queue"].parent is None
    for queue in rows.values():
        assert queue.cluster_uid and queue.cluster_message == ""
        for resource in ("gpu", "cpu", "memory"):
            assert getattr(queue, f"{resource}_quota") == 0
            assert getattr(queue, f"{resource}_limit") == -1
            assert getattr(queue, f"{resource}_over_quota_weight") == 1

    # Bound by the portal, on the test's node, as KAI reports a binding.
    scheduled = events(cluster, namespace, "Scheduled")
    for name in pods:
        pod = core.read_namespaced_pod(name, namespace)
        assert pod.spec.node_name == node
        assert condition(pod, "PodScheduled").status == "True"
        assert scheduled[name] == [
            f"Successfully assigned pod {namespace}/{name} to node {node} at node-pool default"
        ]
    gpu_pod = core.read_namespaced_pod("gpu-pod", namespace)
    assert "kai.scheduler/gpu-devices" not in gpu_pod.metadata.annotations  # KAI writes none either
    # The portal follows them as jobs of KAI's leaf queue.
    for name in pods:
        job = Job.objects.get(name=name)
        assert (job.queue.name, job.state, job.namespace) == ("default-queue", "running", namespace)
        assert Pod.objects.get(job=job).node.name == node
    assert not events(cluster, namespace, "FailedBinding")


def test_the_quickstart_pod_applied_by_two_users_is_named_as_it_is_in_every_message(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, second_namespace: str,
    nodes: Nodes, kai_queues: Callable[[str], list[str]],
) -> None:  # fmt: skip
    """Every user applies gpu-pod.yaml in their own namespace, so two pods share the name. KAI's
    messages name each by its namespace and own name (the job's: "Resources were not found for
    pod team-b/gpu-pod due to: ..."), never by a name made up inside the scheduler; the pod's
    own event and condition carry its fit error, as KAI's do."""
    core = cluster.core
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    node = nodes.kwok("cordoned", gpus=8, spec={"unschedulable": True})
    users = (namespace, second_namespace)
    for ns in users:
        apply_example(cluster, ns, f"{QUICKSTART}/pods/gpu-pod.yaml")

    def explained() -> bool:
        cycle()
        return all(events(cluster, ns, "Unschedulable").get("gpu-pod") for ns in users)

    wait_until(explained, "both gpu-pods to be told why they wait", timeout=60, every=0.5)
    for ns in users:
        [message] = events(cluster, ns, "Unschedulable")["gpu-pod"]
        assert message == "no nodes with enough resources were found: 1 node is unschedulable.", message
        assert Job.objects.get(namespace=ns).message == (
            f"PodSchedulingErrors: Resources were not found for pod {ns}/gpu-pod due to: no nodes with "
            "enough resources were found: 1 node is unschedulable.."
        )
        pod = core.read_namespaced_pod("gpu-pod", ns)
        assert pod.spec.node_name is None
        scheduled = condition(pod, "PodScheduled")
        assert (scheduled.status, scheduled.reason, scheduled.message) == ("False", "Unschedulable", message)
        row = Pod.objects.get(name="gpu-pod", job__namespace=ns)
        assert row.reason == message

    core.patch_node(node, {"spec": {"unschedulable": False}})  # uncordoned

    def both_running() -> bool:
        cycle()
        return all(core.read_namespaced_pod("gpu-pod", ns).status.phase == "Running" for ns in users)

    wait_until(both_running, "both users' gpu-pods to run", timeout=90, every=0.5)
    for ns in users:
        assert core.read_namespaced_pod("gpu-pod", ns).spec.node_name == node
        assert events(cluster, ns, "Scheduled")["gpu-pod"] == [
            f"Successfully assigned pod {ns}/gpu-pod to node {node} at node-pool default"
        ]


def test_kai_batch_job_with_min_member_runs_whole_or_not_at_all(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, nodes: Nodes,
    kai_queues: Callable[[str], list[str]],
) -> None:  # fmt: skip
    """docs/batch/batch-job-min-member.yaml: 6 one-GPU pods, ``kai.scheduler/batch-min-member: 2``
    on the Job. With room for one GPU KAI binds none of them (a gang of 2 cannot start on 1); with
    room for all it binds them and the Job completes."""
    core, batch = cluster.core, cluster.batch
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    nodes.kwok("one-gpu", gpus=1)
    apply_example(cluster, namespace, "docs/batch/batch-job-min-member.yaml")
    selector = "batch.kubernetes.io/job-name=batch-job-min-member"
    wait_until(lambda: len(core.list_namespaced_pod(namespace, label_selector=selector).items) == 6,
               "the Job controller to create the 6 pods")  # fmt: skip

    def all_explained() -> bool:
        cycle()
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        return all(condition(p, "PodScheduled") is not None for p in pods)

    wait_until(all_explained, "the gang's pods to be marked unschedulable", timeout=60, every=0.5)
    cycle()
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    assert [p.spec.node_name for p in pods] == [None] * 6, "a gang of 2 must not start on 1 GPU"
    assert all(condition(p, "PodScheduled").reason == "Unschedulable" for p in pods)
    job = Job.objects.get(name="batch-job-min-member")
    assert (job.queue.name, job.min_member) == ("default-queue", 2)

    big = nodes.kwok("eight-gpus", gpus=8)

    def complete() -> bool:
        cycle()
        return (batch.read_namespaced_job("batch-job-min-member", namespace).status.succeeded or 0) == 6

    wait_until(complete, "the portal to bind the gang and KWOK to complete the Job", timeout=120, every=0.5)
    bound = {p.spec.node_name for p in core.list_namespaced_pod(namespace, label_selector=selector).items}
    assert bound <= {big, nodes.name("one-gpu")} and big in bound


def test_kai_priority_example_as_written_and_as_its_text_means(
    cluster: Cluster, portal_backend: KubernetesBackend, namespace: str, second_namespace: str,
    nodes: Nodes, kai_queues: Callable[[str], list[str]],
) -> None:  # fmt: skip
    """docs/priority: limited-queue.yaml makes queue ``test`` (GPU limit 1), then train-pod (train,
    50, preemptible) and build-pod (build, 100, non-preemptible).

    As written, both pods name ``default-queue`` (GPU quota 0): KAI runs the preemptible train-pod
    over quota and keeps build-pod pending with NonPreemptibleOverQuota (a non-preemptible
    workload only uses in-quota resources). As the text means (queue ``test``; only that label
    changed), build-pod preempts train-pod: "Pod ns/train-pod was preempted by higher priority
    workload ns/build-pod". The second user's pods share the first user's names."""
    core = cluster.core
    kai_queues(f"{QUICKSTART}/default-queues.yaml")
    kai_queues("docs/priority/example/limited-queue.yaml")
    node = nodes.kwok("priority", gpus=8)
    as_written, as_meant = namespace, second_namespace

    def in_test_queue(text: str) -> str:
        return text.replace("kai.scheduler/queue: default-queue", "kai.scheduler/queue: test")

    for ns, edit in ((as_written, None), (as_meant, in_test_queue)):
        apply_example(cluster, ns, "docs/priority/example/train-priority-pod.yaml", edit)

    def trains_run() -> bool:
        cycle()
        pods = [core.read_namespaced_pod("train-pod", ns) for ns in (as_written, as_meant)]
        return all(p.status.phase == "Running" for p in pods)

    wait_until(trains_run, "both train-pods to run", timeout=90, every=0.5)
    assert Job.objects.get(name="train-pod", namespace=as_meant).queue.name == "test"
    for ns, edit in ((as_written, None), (as_meant, in_test_queue)):
        apply_example(cluster, ns, "docs/priority/example/build-priority-pod.yaml", edit)

    def settled() -> bool:
        cycle()
        pending_told = events(cluster, as_written, "Unschedulable").get("build-pod")
        meant = core.read_namespaced_pod("build-pod", as_meant)
        return bool(pending_told) and meant.status.phase == "Running"

    wait_until(settled, "build-pod to wait as written and to preempt as meant", timeout=120, every=0.5)

    # As written: build-pod waits in default-queue, train-pod keeps running.
    [message] = events(cluster, as_written, "Unschedulable")["build-pod"]
    assert message.startswith(
        "NonPreemptibleOverQuota: Non-preemptible workload is over quota. "
        "Workload requested 1 GPUs, but default-queue quota is 0 GPUs"
    ), message
    assert core.read_namespaced_pod("build-pod", as_written).spec.node_name is None
    assert core.read_namespaced_pod("train-pod", as_written).status.phase == "Running"
    # As meant: train-pod was preempted, named as it is in the cluster.
    assert events(cluster, as_meant, "Evict")["train-pod"] == [
        f"Pod {as_meant}/train-pod was preempted by higher priority workload {as_meant}/build-pod"
    ]
    assert core.read_namespaced_pod("build-pod", as_meant).spec.node_name == node
    assert Pod.objects.get(name="train-pod", job__namespace=as_meant).state in {"releasing", "failed"}
