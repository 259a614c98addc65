"""Submitting: a task bigger than every node is refused (form, API, YAML); a job that can never
fit, or GPU memory below any GPU's size, is warned about before it is submitted."""

from __future__ import annotations

from typing import Any

from kai_portal.workloads.models import Job
from tests.portal import factories


def _form(queue: Any, **changes: Any) -> dict[str, Any]:
    data = {"name": "new-job", "queue": queue.pk, "task_count": 1, "min_member": 1, "gpu_mode": "whole",
            "gpu_count": 1, "cpu_cores": "1", "memory_mib": 0, "priority_class": "train", "run_time": "30m",
            "gpu_fraction_devices": 1}  # fmt: skip
    data.update(changes)
    return data


def test_form_refuses_more_gpus_cpu_or_memory_than_any_node_has(world: dict, client_for: Any) -> None:
    client, queue = client_for("member"), world["queues"]["alpha"]
    before = Job.objects.count()
    response = client.post("/jobs/submit/", _form(queue, gpu_count=9))
    errors = response.context["form"].errors
    assert (
        "Each task asks for 9 GPUs, but no node in the default pool has more than 8 GPUs"
        in errors["gpu_count"][0]
    )
    response = client.post("/jobs/submit/", _form(queue, cpu_cores="65"))
    assert "no node in the default pool has more than 64" in response.context["form"].errors["cpu_cores"][0]
    response = client.post("/jobs/submit/", _form(queue, memory_mib=300_000))
    assert "more than 262144 MiB" in response.context["form"].errors["memory_mib"][0]
    response = client.post("/jobs/submit/", _form(queue, gpu_mode="memory", gpu_memory_mib=90_000))
    assert (
        "the largest GPU in the default pool has 81920 MiB"
        in response.context["form"].errors["gpu_memory_mib"][0]
    )
    assert Job.objects.count() == before


def test_a_task_is_judged_against_one_node_not_the_pool_total(world: dict, client_for: Any) -> None:
    factories.node("gpu-node-2", gpus=8)
    response = client_for("member").post("/jobs/submit/", _form(world["queues"]["alpha"], gpu_count=9))
    assert (
        "no node in the default pool has more than 8 GPUs" in response.context["form"].errors["gpu_count"][0]
    )


def test_api_and_yaml_refuse_a_task_bigger_than_every_node(world: dict, client_for: Any) -> None:
    client = client_for("member")
    body = {"name": "huge", "queue": "alpha-train", "gpu_count": 12}
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400
    assert "no node in the default pool has more than 8 GPUs" in response.json()["gpu_count"][0]
    manifest = """apiVersion: v1
kind: Pod
metadata: {name: huge, labels: {kai.scheduler/queue: alpha-train}}
spec:
  containers: [{name: main, image: x, resources: {limits: {nvidia.com/gpu: "12"}}}]
"""
    response = client.post("/api/v1/jobs/manifest/", manifest, content_type="application/yaml")
    assert response.status_code == 400
    assert response.json()["path"] == 'spec.containers[0].resources.limits["nvidia.com/gpu"]'
    assert not Job.objects.filter(name="huge").exists()


def test_a_job_that_can_never_fit_is_submitted_only_after_confirming(world: dict, client_for: Any) -> None:
    client, queue = client_for("outsider"), world["queues"]["beta"]  # beta-train: limit 4 GPUs
    response = client.post("/jobs/submit/", _form(queue, gpu_count=6))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="submit-warnings"' in html and "Can never fit" in html and "limit" in html
    assert not Job.objects.filter(name="new-job").exists()
    response = client.post("/jobs/submit/", _form(queue, gpu_count=6, confirmed="1"))
    assert response.status_code == 302
    assert Job.objects.get(name="new-job").gpu_count == 6


def test_gpu_memory_below_a_plausible_size_is_warned_in_form_api_and_yaml(
    world: dict, client_for: Any
) -> None:
    client, queue = client_for("member"), world["queues"]["alpha"]
    response = client.post("/jobs/submit/", _form(queue, gpu_mode="memory", gpu_memory_mib=20))
    assert "did you mean 20 GiB = 20480 MiB?" in response.content.decode().replace("Did", "did")
    assert not Job.objects.filter(name="new-job").exists()

    body = {"name": "small-mem", "queue": "alpha-train", "gpu_count": 0, "gpu_memory_mib": 20}
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == [
        "GPU memory is in MiB: 20 MiB is less than any GPU has. Did you mean 20 GiB = 20480 MiB?"
    ]
    body = {"name": "real-mem", "queue": "alpha-train", "gpu_count": 0, "gpu_memory_mib": 20480}
    assert client.post("/api/v1/jobs/", body, content_type="application/json").json()["warnings"] == []

    manifest = """apiVersion: v1
kind: Pod
metadata: {name: yaml-mem, labels: {kai.scheduler/queue: alpha-train}, annotations: {gpu-memory: "20"}}
spec: {containers: [{name: main, image: x}]}
"""
    response = client.post("/jobs/submit/yaml/", {"manifest": manifest}, follow=True)
    assert Job.objects.get(name="yaml-mem").gpu_memory_mib == 20  # KAI's unit is kept
    assert "Did you mean 20 GiB = 20480 MiB?" in response.content.decode()
