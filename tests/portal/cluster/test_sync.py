"""sync_cluster_state against the emulator: gang minimums from annotations, QueueDoesNotExist events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.workloads.models import Job, Pod
from tests.backends.conftest import api_client, backend, core, emulator, emulator_and_url, make_node, make_pod
from tests.backends.emulator import KubeApiEmulator
from tests.portal import factories

__all__ = ["api_client", "backend", "core", "emulator", "emulator_and_url"]  # fixtures used below

pytestmark = pytest.mark.django_db

TEAM = {"kai.scheduler/queue": "team-a"}


def _events(emulator: KubeApiEmulator) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in emulator.request_log
            if r.method == "POST" and r.url.path.endswith("/namespaces/team-a/events")]  # fmt: skip


@pytest.fixture
def team_queue(db):
    dept = factories.queue("dept", gpu_quota=8)
    return factories.queue("team-a", parent=dept, gpu_quota=8)


def _batch_pod(core: client.CoreV1Api, name: str, min_member: str, job: str = "train") -> None:
    make_pod(core, name, labels=TEAM, gpus=1,
             annotations={"pod-group-name": job, "kai.scheduler/batch-min-member": min_member})  # fmt: skip


def test_batch_min_member_sets_the_gang_minimum(
    loop, team_queue, core: client.CoreV1Api, backend: KubernetesBackend
):
    make_node(core, "gpu-1", gpus=8)
    _batch_pod(core, "train-0", "2")
    _batch_pod(core, "train-1", "2")
    make_pod(core, "plain", labels=TEAM)

    cycle = loop.run(backend=backend)

    assert cycle.status == "succeeded", cycle.error
    job = Job.objects.get(cluster_key="team-a/PodGroup/train")
    assert (job.task_count, job.min_member) == (2, 2)
    assert Job.objects.get(cluster_key="team-a/Pod/plain").min_member == 1


def test_batch_min_member_is_never_capped_to_the_pods_seen_so_the_gang_waits_for_them(
    loop, team_queue, core: client.CoreV1Api, backend: KubernetesBackend
):
    """KAI: a PodGroup is not ready for scheduling until minMember pods exist (issue 16)."""
    make_node(core, "gpu-1", gpus=8)
    _batch_pod(core, "train-0", "3")
    loop.run(backend=backend)
    job = Job.objects.get(cluster_key="team-a/PodGroup/train")
    assert (job.task_count, job.min_member) == (3, 3)
    pod = Pod.objects.get(name="train-0")
    assert pod.state == "pending" and pod.node is None
    assert "Waiting for 3 pods, currently 1 exist" in job.message + pod.reason

    _batch_pod(core, "train-1", "3")
    _batch_pod(core, "train-2", "3")
    _batch_pod(core, "train-3", "3")
    loop.run(5, backend=backend)
    job.refresh_from_db()
    assert (job.task_count, job.min_member) == (4, 3)


def test_a_pod_naming_a_missing_queue_is_told_so_and_gets_no_rows(
    loop, team_queue, emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
):
    make_node(core, "gpu-1", gpus=8)
    make_pod(core, "lost", labels={"kai.scheduler/queue": "no-such-queue"}, gpus=1)

    cycle = loop.run(backend=backend)

    assert cycle.status == "succeeded", cycle.error
    assert not Job.objects.exists() and not Pod.objects.exists()
    events = [e for e in _events(emulator) if e["involvedObject"]["name"] == "lost"]
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [
        ("Warning", "Unschedulable", "Queue 'no-such-queue' does not exist")
    ]
    assert events[0]["involvedObject"]["kind"] == "Pod"


def test_a_pod_naming_no_queue_falls_back_to_default_queue(
    loop, team_queue, emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
):
    make_pod(core, "unlabeled")

    loop.run(backend=backend)
    assert not Job.objects.exists()
    assert [e["message"] for e in _events(emulator)] == ["Queue 'default-queue' does not exist"]

    factories.queue("default-queue", parent=team_queue.parent)
    loop.run(5, backend=backend)
    assert Job.objects.get().queue.name == "default-queue"


def test_a_running_pod_in_a_missing_queue_gets_no_event(
    loop, team_queue, emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
):
    make_node(core, "gpu-1", gpus=8)
    make_pod(core, "elsewhere", labels={"kai.scheduler/queue": "gone"}, spec={"nodeName": "gpu-1"},
             status={"phase": "Running"})  # fmt: skip

    loop.run(backend=backend)

    assert not Job.objects.exists()
    assert _events(emulator) == []
