"""The API client plumbing (backends/kubernetes/client.py): one caught write behind the leader's guard,
the API's own words in a failure, and a compacted watch falling back to a fresh list (kmock)."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes.client import FIELD_MANAGER, Caller, error_text, release

from .conftest import make_pod
from .emulator import KubeApiEmulator


def test_a_replica_that_lost_the_lease_makes_no_cycle_write_but_still_submits() -> None:
    made: list[str] = []
    caller = Caller()
    caller.write_guard = lambda: "Not the leader: the lease kai-portal/x is held by b"

    refused = caller.call("bind", "team-a", "p1", lambda: made.append("bind"))
    submitted = caller.call("submit", "team-a", "j-0", lambda: made.append("submit"))

    assert made == ["submit"], "the bind was never sent"
    assert (refused.ok, refused.error) == (False, "Not the leader: the lease kai-portal/x is held by b")
    assert submitted.ok


def test_a_refused_call_is_reported_with_the_api_servers_own_message_and_status() -> None:
    def refuse() -> None:
        error = ApiException(status=409, reason="Conflict")
        message = 'pods "p1" is already assigned to node "gpu-1"'
        error.body = json.dumps({"kind": "Status", "message": message})
        raise error

    result = Caller().call("bind", "team-a", "p1", refuse)

    assert (result.ok, result.status_code) == (False, 409)
    assert result.error == '409 Conflict: pods "p1" is already assigned to node "gpu-1"'
    assert error_text(OSError("connection refused")) == "OSError: connection refused"


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


def test_a_hot_write_is_the_request_the_generated_method_makes(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    """``HotWrites`` (the per-pod writes without the generated client's per-call layer) sends what
    ``create_namespaced_pod_binding`` sends: method, path, fieldManager, Accept and the same JSON;
    a refusal raises the generated method's exception, the API's own words in its body."""
    make_pod(core, "by-hand")
    make_pod(core, "hot")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": "by-hand",
            "namespace": "team-a",
            "annotations": {"received-resource-type": "Regular"},
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"},
    }
    generated = client.V1Binding.from_dict(binding)
    core.create_namespaced_pod_binding(
        "by-hand", "team-a", generated, field_manager=FIELD_MANAGER, _preload_content=False
    ).read()
    hot = {**binding, "metadata": {**binding["metadata"], "name": "hot"}}
    release(backend.writes.bind("team-a", "hot", hot))

    binds = [r for r in emulator.request_log if r.method == "POST" and r.url.path.endswith("/binding")]
    assert [r.url.path for r in binds] == [
        "/api/v1/namespaces/team-a/pods/by-hand/binding",
        "/api/v1/namespaces/team-a/pods/hot/binding",
    ]
    assert [dict(r.params) for r in binds] == [{"fieldManager": FIELD_MANAGER}] * 2
    assert [r.headers.get("Accept") for r in binds] == ["application/json"] * 2
    sent = [json.loads(r.body) for r in binds]
    assert sent[1] == {**sent[0], "metadata": {**sent[0]["metadata"], "name": "hot"}}
    assert core.read_namespaced_pod("hot", "team-a").spec.node_name == "gpu-1"
    with pytest.raises(ApiException) as refused:
        backend.writes.bind(
            "team-a", "gone", {**binding, "metadata": {"name": "gone", "namespace": "team-a"}}
        )
    assert refused.value.status == 404
    assert (
        Caller()
        .call("bind", "team-a", "gone", lambda: backend.writes.bind("team-a", "gone", hot))
        .status_code
        == 404
    )


def test_a_raw_watch_event_is_what_the_clients_own_unmarshal_gives_for_plain_objects() -> None:
    from kubernetes import watch

    from kai_portal.cluster.backends.kubernetes.client import RawWatch

    pod = {"kind": "Pod", "metadata": {"name": "p1", "resourceVersion": "42"}, "spec": {"priority": 7}}
    lines = [
        json.dumps({"type": "MODIFIED", "object": pod}),
        json.dumps({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "50"}}}),
        json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
        "",
        "not json",
    ]
    ours, theirs = RawWatch(return_type="object"), watch.Watch(return_type="object")
    for line in lines:
        mine = ours.unmarshal_event(line, "object")
        assert mine == theirs.unmarshal_event(line, "object")
        assert ours.resource_version == theirs.resource_version
    assert ours.resource_version == "50"
