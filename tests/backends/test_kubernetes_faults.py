"""Faults the real API server will not produce on demand, injected through kmock's emulator.

Everything else about the Kubernetes backend is tested against a real
kube-apiserver in tests/cluster/. A server that answers 500 to one bind or
503 to one event write cannot be made from the outside, and a real server
answers a watch with 410 Gone only once its watch cache and etcd's compaction
have both moved past the version, which a test cannot bring about quickly
(a young API server serves a watch from version 1 without complaint), so
these stay here.
"""

from __future__ import annotations

import json

from kubernetes import client

from kai_portal.cluster.backends import Bind
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import make_node, make_pod
from .emulator import KubeApiEmulator

BINDING = "/api/v1/namespaces/team-a/pods/{}/binding"
EVENTS = "/api/v1/namespaces/team-a/events"


def test_a_server_error_on_one_bind_is_reported_and_the_next_binds_still_happen(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_node(core, "gpu-1")
    make_pod(core, "p1", gpus=1)
    make_pod(core, "p2", gpus=1)
    backend.observe()
    emulator.faults[("POST", BINDING.format("p1"))] = 500

    report = backend.apply([Bind("team-a", "p1", "gpu-1"), Bind("team-a", "p2", "gpu-1")], [], [])

    binds = report.of("bind")
    assert [(b.name, b.ok, b.status_code) for b in binds] == [("p1", False, 500), ("p2", True, None)]
    assert binds[0].error == "500 Internal Server Error: injected fault 500"
    events = [json.loads(r.body) for r in emulator.request_log if r.method == "POST" and r.url.path == EVENTS]
    # Events about different pods go out side by side: their order at the server is not fixed.
    assert sorted((e["involvedObject"]["name"], e["reason"]) for e in events) == [
        ("p1", "FailedBinding"), ("p2", "Scheduled")]
    state = backend.observe()
    assert (state.pods["team-a", "p1"].node, state.pods["team-a", "p2"].node) == (None, "gpu-1")


def test_a_failed_event_write_is_reported_and_does_not_undo_the_bind(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_node(core, "gpu-1")
    make_pod(core, "p1", gpus=1)
    backend.observe()
    emulator.faults[("POST", EVENTS)] = 503

    report = backend.apply([Bind("team-a", "p1", "gpu-1")], [], [])

    assert [(r.operation, r.ok, r.status_code) for r in report.results] == [
        ("bind", True, None), ("event", False, 503)]
    assert backend.observe().pods["team-a", "p1"].node == "gpu-1"


def test_an_expired_resource_version_falls_back_to_a_fresh_list(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_pod(core, "first")
    backend.observe()
    make_pod(core, "second")
    emulator.compacted_below = emulator.version + 1  # history before now is gone: 410

    state = backend.observe()

    assert set(state.pods) == {("team-a", "first"), ("team-a", "second")}
    log = emulator.request_log
    pod_gets = [dict(r.params) for r in log if r.method == "GET" and r.url.path == "/api/v1/pods"]
    assert [p.get("watch") for p in pod_gets] == [None, "true", None]  # list, watch (410), list


def test_a_refused_owner_read_or_podgroup_list_never_fails_observe(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    """KAI's pod-grouper stops at the last owner it may read (podgrouper.go handleGetOwnerError);
    the portal does the same, and a failing PodGroup list only leaves the owners' settings."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-rs", "controller": True}
    make_pod(core, "p", labels={"kai.scheduler/queue": "team-a"}, metadata={"ownerReferences": [owner]})
    emulator.faults[("GET", "/apis/apps/v1/namespaces/team-a/replicasets/rs")] = 403
    emulator.faults[("GET", "/apis/scheduling.run.ai/v2alpha2/podgroups")] = 500

    pod = backend.observe().pods["team-a", "p"]

    assert not emulator.faults, "both faults were served"
    reads = [r.url.path for r in emulator.request_log if r.method == "GET"]
    assert reads.count("/apis/apps/v1/namespaces/team-a/replicasets/rs") == 1, "a refusal is not asked again"
    assert (pod.job.key, pod.queue) == ("team-a/ReplicaSet/rs", "team-a")
    assert (pod.priority_class, pod.priority) == ("train", 50)
