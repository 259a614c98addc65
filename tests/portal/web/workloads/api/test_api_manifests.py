"""Kubernetes manifests (Pod, batch/v1 Job) with KAI labels and annotations as job submissions."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from kai_portal.workloads.manifests import ManifestError, parse_manifest
from kai_portal.workloads.models import Job, Pod
from tests.portal.web.api_world import World

BATCH_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: resnet
  namespace: ml
  labels: {kai.scheduler/queue: ml-train, priorityClassName: build}
  annotations: {kai.scheduler/batch-min-member: "2"}
spec:
  parallelism: 3
  completions: 6
  template:
    metadata:
      annotations: {gpu-fraction: "0.5", gpu-fraction-num-devices: "2"}
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: pytorch:24
          command: [python, train.py]
          resources: {requests: {cpu: 500m, memory: 1Gi}}
        - name: sidecar
          image: logger
          resources: {limits: {cpu: "1", memory: 512Mi}}
"""


def post(world: World, text: str, persona: str = "member", content_type: str = "application/yaml"):
    return world.client(persona).post("/api/v1/jobs/manifest/", text, content_type=content_type)


def test_batch_job_manifest_becomes_a_gang_with_fractional_gpus(world: World) -> None:
    response = post(world, BATCH_JOB)
    assert response.status_code == 201, response.content
    job = Job.objects.get(uid=response.json()["uid"])
    assert (job.name, job.queue.name, job.task_count, job.min_member) == ("resnet", "ml-train", 3, 2)
    assert (job.gpu_fraction, job.gpu_fraction_devices, job.gpu_count) == (Decimal("0.50"), 2, 0)
    assert (job.cpu_millicores, job.memory_mib) == (1500, 1536)
    assert (job.priority_class, job.priority, job.restart_policy) == ("build", 100, "Never")
    assert job.submitter.username == "ml-dev" and job.command == "python train.py"
    assert job.pods.count() == 3


def test_pod_manifest_as_json_with_legacy_queue_label_and_gpu_memory(world: World) -> None:
    manifest = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "notebook", "labels": {"runai/queue": "ml-train"},
                     "annotations": {"gpu-memory": "20000"}},
        "spec": {"priorityClassName": "inference", "containers": [{"name": "c", "image": "jupyter"}]},
    }  # fmt: skip
    response = post(world, json.dumps(manifest), content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["queue"], body["gpu_memory_mib"], body["priority"], body["task_count"]) == (
        "ml-train", 20000, 125, 1,
    )  # fmt: skip


def test_whole_gpus_from_container_limits(world: World) -> None:
    text = BATCH_JOB.replace('{gpu-fraction: "0.5", gpu-fraction-num-devices: "2"}', "{}").replace(
        "resources: {requests: {cpu: 500m, memory: 1Gi}}",
        "resources: {limits: {nvidia.com/gpu: 2}, requests: {cpu: 500m, memory: 1Gi}}",
    )
    job = parse_manifest(text)
    assert (job.gpu_count, job.gpu_fraction) == (2, None)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (("kind: Job", "kind: Deployment"), "kind", "must be Pod"),
        (("apiVersion: batch/v1", "apiVersion: v1"), "apiVersion", "batch/v1"),
        (("kai.scheduler/queue: ml-train", "kai.scheduler/queue: cv-train"),
         'metadata.labels["kai.scheduler/queue"]', 'queue "cv-train" does not exist or is not yours'),
        (("kai.scheduler/queue: ml-train", "kai.scheduler/queue: research"),
         'metadata.labels["kai.scheduler/queue"]', "not a leaf queue"),
        (("kai.scheduler/queue: ml-train, ", ""), 'metadata.labels["kai.scheduler/queue"]', "is required"),
        (('gpu-fraction: "0.5"', 'gpu-fraction: "1.5"'),
         'spec.template.metadata.annotations["gpu-fraction"]', "at most 1"),
        (('gpu-fraction: "0.5"', 'gpu-fraction: "half"'),
         'spec.template.metadata.annotations["gpu-fraction"]', "number"),
        (("cpu: 500m", "cpu: lots"),
         'spec.template.spec.containers[0].resources.requests["cpu"]', "quantity"),
        (('batch-min-member: "2"', 'batch-min-member: "9"'),
         'metadata.annotations["kai.scheduler/batch-min-member"]', "cannot be more than"),
        (("priorityClassName: build", "priorityClassName: urgent"),
         'metadata.labels["priorityClassName"]', "must be one of"),
        (("parallelism: 3", "parallelism: -1"), "spec.parallelism", "at least 1"),
        (("restartPolicy: Never", "restartPolicy: Sometimes"),
         "spec.template.spec.restartPolicy", "OnFailure"),
        (("      containers:", "      containerz:"),
         "spec.template.spec.containers", "at least one container"),
        (("name: resnet", "name: Not_A_Name" + "x" * 300), "metadata.name", "at most 253"),
    ],
)  # fmt: skip
def test_bad_manifest_is_a_400_naming_the_path_and_nothing_is_created(
    world: World, change: tuple[str, str], path: str, words: str
) -> None:
    jobs, pods = Job.objects.count(), Pod.objects.count()
    response = post(world, BATCH_JOB.replace(*change))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["path"] == path and words in body["message"], body
    assert body["detail"].startswith(path)
    assert (Job.objects.count(), Pod.objects.count()) == (jobs, pods)


@pytest.mark.parametrize("text", ["", "a: [", "- just\n- a list\n", "kind: Pod\n---\nkind: Pod\n"])
def test_unreadable_bodies_are_400s(world: World, text: str) -> None:
    response = post(world, text)
    assert response.status_code == 400 and response.json()["path"] == "(body)"


def test_model_rules_are_reported_on_the_manifest_path(world: World) -> None:
    from kai_portal.nodes.models import NodePool

    NodePool.objects.create(name="whole-only", gpu_sharing=False)
    text = BATCH_JOB.replace(
        "priorityClassName: build}", "priorityClassName: build, kai.scheduler/node-pool: whole-only}"
    )
    response = post(world, text)
    assert response.status_code == 400
    assert response.json()["path"] == 'metadata.labels["kai.scheduler/node-pool"]'


def test_parse_manifest_without_a_user_accepts_any_leaf_and_raises_manifest_error() -> None:
    with pytest.raises(ManifestError) as exc:
        parse_manifest("kind: Service\n")
    assert exc.value.path == "kind"


def test_batch_job_without_min_member_annotation_gets_kai_default_gang_of_one(world: World) -> None:
    # KAI's pod grouper gives a standard Job minMember 1: its pods may start one by one.
    text = BATCH_JOB.replace('  annotations: {kai.scheduler/batch-min-member: "2"}\n', "")
    response = post(world, text)
    assert response.status_code == 201, response.content
    job = Job.objects.get(uid=response.json()["uid"])
    assert (job.task_count, job.min_member) == (3, 1)
