"""apply(), submit() and cancel(): the exact requests Kubernetes receives, and failures."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from kai_portal.cluster.backends import Bind, EventType, Evict, PodEvent, PodSpecRequest, TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import make_node, make_pod
from .emulator import KubeApiEmulator


def _posts(emulator: KubeApiEmulator, suffix: str) -> list[dict[str, Any]]:
    # request.body is the raw bytes on the wire, before the emulator stamps anything.
    return [json.loads(r.body) for r in emulator.request_log
            if r.method == "POST" and r.url.path.endswith(suffix)]


def _without_times(event: dict[str, Any]) -> dict[str, Any]:
    assert event.pop("firstTimestamp") == event.pop("lastTimestamp")
    assert event["metadata"].pop("name").startswith(event["involvedObject"]["name"] + ".")
    return event


def test_bind_posts_a_binding_and_a_scheduled_event(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_node(core, "gpu-1", labels={"kai.scheduler/node-pool": "training"})
    make_pod(core, "p1", gpus=2)
    uid = backend.observe().pods["team-a", "p1"].uid

    report = backend.apply([Bind("team-a", "p1", "gpu-1", gpu_devices=[0, 3])], [], [])

    assert report.ok
    assert _posts(emulator, "/pods/p1/binding") == [{
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p1", "namespace": "team-a", "uid": uid,
                     "annotations": {"kai.scheduler/gpu-devices": "0,3"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"},
    }]
    assert [_without_times(e) for e in _posts(emulator, "/namespaces/team-a/events")] == [{
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": "team-a"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p1", "namespace": "team-a"},
        "reason": "Scheduled",
        "message": "Successfully assigned pod team-a/p1 to node gpu-1 at node-pool training",
        "type": "Normal",
        "source": {"component": "kai-scheduler"},
        "reportingComponent": "kai-scheduler",
        "reportingInstance": "kai-scheduler",
        "count": 1,
    }]
    pod = backend.observe().pods["team-a", "p1"]
    assert (pod.node, pod.status, pod.gpu_devices) == ("gpu-1", TaskStatus.BOUND, (0, 3))


def test_a_failed_bind_is_reported_and_the_others_still_happen(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_pod(core, "already", spec={"nodeName": "gpu-9"})
    make_pod(core, "fine")
    backend.observe()

    report = backend.apply([
        Bind("team-a", "gone", "gpu-1"),
        Bind("team-a", "already", "gpu-1"),
        Bind("team-a", "fine", "gpu-1", gpu_devices=[1], gpu_fraction=0.5, pool="p"),
    ], [], [])

    binds = report.of("bind")
    assert [(b.name, b.ok, b.status_code) for b in binds] == [
        ("gone", False, 404), ("already", False, 409), ("fine", True, None)]
    assert binds[0].error == '404 Not Found: pods "gone" not found'
    assert "already assigned" in (binds[1].error or "")
    reasons = [(e["involvedObject"]["name"], e["reason"], e["type"], e["message"])
               for e in _posts(emulator, "/events")]
    failed = 'Failed to bind pod team-a/gone to node gpu-1. 404 Not Found: pods "gone" not found'
    assert reasons[0] == ("gone", "FailedBinding", "Warning", failed)
    assert reasons[2][:3] == ("fine", "Scheduled", "Normal")
    fine = _posts(emulator, "/pods/fine/binding")[0]
    assert fine["metadata"]["annotations"] == {
        "kai.scheduler/gpu-devices": "1", "kai.scheduler/gpu-fraction": "0.5"}
    assert backend.observe().pods["team-a", "fine"].node == "gpu-1"


def test_evict_posts_a_policy_v1_eviction_and_an_evict_event(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_pod(core, "victim", spec={"nodeName": "gpu-1"}, status={"phase": "Running"},
             metadata={"finalizers": ["example.com/hold"]})
    uid = backend.observe().pods["team-a", "victim"].uid
    message = "Pod team-a/victim was preempted by higher priority workload team-b/pg-big"

    report = backend.apply([], [
        Evict("team-a", "victim", message, action="preempt",
              evictor_namespace="team-b", evictor_job="pg-big"),
        Evict("team-a", "missing", "whatever"),
    ], [])

    assert [(r.operation, r.name, r.ok) for r in report.results][:2] == [
        ("evict", "victim", True), ("event", report.results[1].name, True)]
    assert report.of("evict")[1].status_code == 404
    assert _posts(emulator, "/pods/victim/eviction") == [{
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "victim", "namespace": "team-a"},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }]
    event = _posts(emulator, "/events")[0]
    assert (event["reason"], event["type"], event["message"]) == ("Evict", "Normal", message)
    assert event["metadata"]["annotations"] == {
        "num-evicted-pods": "1", "evictor-action-type": "preempt",
        "evictor-pod-group-name": "pg-big", "evictor-pod-group-namespace": "team-b"}
    assert backend.observe().pods["team-a", "victim"].status is TaskStatus.RELEASING


def test_repeated_events_bump_the_count_instead_of_piling_up(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    text = "no nodes with enough resources were found: 3 node(s) didn't have enough resources: GPUs."
    waiting = PodEvent("team-a", "p1", EventType.WARNING, "Unschedulable", text)
    group = PodEvent("team-a", "pg-1", EventType.NORMAL, "Unschedulable", "Unable to schedule podgroup",
                     kind="PodGroup")

    backend.apply([], [], [waiting, group])
    backend.apply([], [], [waiting])

    created = _posts(emulator, "/events")
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["apiVersion"], e["type"]) for e in created] == [
        ("Pod", "v1", "Warning"), ("PodGroup", "scheduling.run.ai/v2alpha2", "Normal")]
    patches = [r for r in emulator.request_log if r.method == "PATCH"]
    assert len(patches) == 1 and patches[0].url.path.endswith("/events/" + created[0]["metadata"]["name"])
    assert json.loads(patches[0].body)["count"] == 2


def test_submit_creates_one_pod_per_task_and_cancel_deletes_them(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    request = PodSpecRequest(namespace="team-a", job_name="train-7", queue="research", image="pytorch:2",
                             num_tasks=2, command=["python", "train.py"], gpu_fraction=0.25,
                             cpu_millis=2000, memory_mib=4096, priority_class="train")
    make_pod(core, "unrelated")

    assert backend.submit(request).ok

    created = _posts(emulator, "/namespaces/team-a/pods")[1:]
    assert [p["metadata"]["name"] for p in created] == ["train-7-0", "train-7-1"]
    assert created[0]["metadata"]["labels"] == {
        "kai.scheduler/queue": "research",
        "kai.scheduler/portal-job": "train-7",
        "priorityClassName": "train",
    }
    assert created[0]["metadata"]["annotations"] == {"pod-group-name": "train-7", "gpu-fraction": "0.25"}
    assert created[0]["spec"] == {
        "schedulerName": "kai-scheduler", "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "pytorch:2", "command": ["python", "train.py"],
                        "resources": {"requests": {"cpu": "2000m", "memory": "4096Mi"}}}]}
    pods = backend.observe().pods
    assert {pods["team-a", n].job.name for n in ("train-7-0", "train-7-1")} == {"train-7"}
    assert pods["team-a", "train-7-0"].gpu.fraction == 0.25

    report = backend.cancel("team-a", "train-7")

    assert [(r.operation, r.name, r.ok) for r in report.results] == [
        ("cancel", "train-7-0", True), ("cancel", "train-7-1", True)]
    assert set(backend.observe().pods) == {("team-a", "unrelated")}


def test_whole_gpu_submission_sets_the_container_limit(
    emulator: KubeApiEmulator, backend: KubernetesBackend
) -> None:
    backend.submit(PodSpecRequest(namespace="team-a", job_name="big", queue="q", image="x", gpus=4))

    pod = _posts(emulator, "/namespaces/team-a/pods")[0]
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    assert backend.observe().pods["team-a", "big-0"].gpu.whole == 4
