"""The portal's own jobs against the real API server: submit() creates their pods, cancel() deletes them
(backends/kubernetes/portal_jobs.py)."""

from __future__ import annotations

from typing import Any

from kai_portal.cluster.backends import PodSpecRequest
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, pod_body


def test_submit_creates_one_pod_per_task_and_cancel_deletes_them(
    cluster: Cluster, namespace: str, scheduler_name: str, backend: KubernetesBackend
) -> None:
    request = PodSpecRequest(namespace=namespace, job_name="train-7", queue="research", image="pytorch:2",
                             num_tasks=2, command=["python", "train.py"], gpu_fraction=0.25,
                             cpu_millis=2000, memory_mib=4096, priority_class="train")  # fmt: skip
    cluster.core.create_namespaced_pod(namespace, pod_body("unrelated", scheduler_name))

    assert backend.submit(request).ok

    created = {p.metadata.name: p for p in cluster.core.list_namespaced_pod(
        namespace, label_selector="kai.scheduler/portal-job=train-7").items}  # fmt: skip
    assert set(created) == {"train-7-0", "train-7-1"}
    pod = created["train-7-0"]
    assert pod.metadata.labels == {
        "kai.scheduler/queue": "research",
        "kai.scheduler/portal-job": "train-7",
        "priorityClassName": "train",
    }
    assert pod.metadata.annotations == {"pod-group-name": "train-7", "gpu-fraction": "0.25"}
    assert (pod.spec.scheduler_name, pod.spec.restart_policy) == (scheduler_name, "Never")
    [container] = pod.spec.containers
    assert (container.image, container.command) == ("pytorch:2", ["python", "train.py"])
    assert container.resources.requests == {"cpu": "2", "memory": "4Gi"}  # the server normalises quantities
    pods = backend.observe().pods
    assert {pods[namespace, n].job.name for n in ("train-7-0", "train-7-1")} == {"train-7"}
    assert pods[namespace, "train-7-0"].gpu.fraction == 0.25

    report = backend.cancel(namespace, "train-7")

    assert [(r.operation, r.name, r.ok) for r in report.results] == [
        ("cancel", "train-7-0", True), ("cancel", "train-7-1", True)]  # fmt: skip
    assert set(backend.observe().pods) == {(namespace, "unrelated")}


def test_whole_gpu_submission_sets_the_container_limit(
    cluster: Cluster, namespace: str, backend: KubernetesBackend
) -> None:
    backend.submit(PodSpecRequest(namespace=namespace, job_name="big", queue="q", image="x", gpus=4))

    resources: Any = cluster.core.read_namespaced_pod("big-0", namespace).spec.containers[0].resources
    # Kubernetes defaults an extended resource's request to its limit.
    assert (resources.limits, resources.requests) == ({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "4"})
    assert backend.observe().pods[namespace, "big-0"].gpu.whole == 4
