"""Faults the real API server will not produce on demand, injected through kmock's emulator.

Everything else about the Kubernetes backend is tested against a real
kube-apiserver in tests/cluster/. A server that answers 500 to one bind or
503 to one event write cannot be made from the outside, and a real server
answers a watch with 410 Gone only once its watch cache and etcd's compaction
have both moved past the version, which a test cannot bring about quickly
(a young API server serves a watch from version 1 without complaint), so
these stay here: the composed backend's faults in this file, the 410 in
test_client.py and a refused owner read in test_pod_grouping.py.
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
        ("p1", "FailedBinding"), ("p2", "Bound"), ("p2", "Scheduled")]
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

    # The PodGroup (created, its status, its start) is written after the bind; the pod's Scheduled
    # event is refused (a fault answers once), its Bound event and PodBound condition are written;
    # the bind stands.
    assert [(r.operation, r.ok, r.status_code) for r in report.results] == [
        ("bind", True, None), ("podgroup", True, None), ("podgroup-status", True, None),
        ("podgroup", True, None), ("event", False, 503), ("event", True, None), ("condition", True, None)]
    assert backend.observe().pods["team-a", "p1"].node == "gpu-1"
