"""The binder against the real API server: binds, their events and results, and the marks of our own
binds until the watch shows them (backends/kubernetes/binder.py, through apply())."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client

from kai_portal.cluster.backends import Bind, EventType, PodEvent, TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, pod_body, wait_until


def _events(cluster: Cluster, namespace: str) -> list[client.CoreV1Event]:
    return list(cluster.core.list_namespaced_event(namespace).items)


def test_bind_sets_the_node_and_kais_binder_annotation_and_writes_a_scheduled_event(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    node = nodes.make("gpu-1", labels={"kai.scheduler/node-pool": "training"})
    cluster.core.create_namespaced_pod(namespace, pod_body("p1", scheduler_name, gpus=2))
    uid = backend.observe().pods[namespace, "p1"].uid

    report = backend.apply([Bind(namespace, "p1", node, gpu_devices=[0, 3])], [], [])

    assert report.ok, report.failures
    pod = cluster.core.read_namespaced_pod("p1", namespace)
    # The API server copies the Binding's annotations onto the pod in the same write.
    assert (pod.spec.node_name, pod.metadata.uid) == (node, uid)
    # KAI's binder's annotation; no device for whole GPUs (KAI writes none: the device plugin picks).
    assert pod.metadata.annotations["received-resource-type"] == "Regular"
    assert "kai.scheduler/gpu-devices" not in pod.metadata.annotations
    [event] = [e for e in _events(cluster, namespace) if e.reason == "Scheduled"]
    # KAI's binder's own event beside the scheduler's.
    [bound] = [e for e in _events(cluster, namespace) if e.reason == "Bound"]
    assert (bound.message, bound.source.component) == (f"Pod bound successfully to node {node}", "binder")
    assert event.metadata.name.startswith("p1.")
    involved = event.involved_object
    assert (involved.kind, involved.api_version, involved.name, involved.namespace) == (
        "Pod", "v1", "p1", namespace)  # fmt: skip
    assert (event.reason, event.type, event.count) == ("Scheduled", "Normal", 1)
    assert event.message == f"Successfully assigned pod {namespace}/p1 to node {node} at node-pool training"
    assert (event.source.component, event.reporting_component) == (scheduler_name, scheduler_name)
    assert event.first_timestamp == event.last_timestamp
    observed = backend.observe().pods[namespace, "p1"]
    # No device for whole GPUs, as KAI (the portal's engine places them on free devices).
    assert (observed.node, observed.status, observed.gpu_devices) == (node, TaskStatus.BOUND, ())


def test_a_failed_bind_is_reported_and_the_others_still_happen(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    node, elsewhere = nodes.make("gpu-1"), nodes.make("gpu-9")
    cluster.core.create_namespaced_pod(namespace, pod_body("already", scheduler_name, nodeName=elsewhere))
    cluster.core.create_namespaced_pod(namespace, pod_body("fine", scheduler_name))
    backend.observe()

    report = backend.apply([
        Bind(namespace, "gone", node),
        Bind(namespace, "already", node),
        Bind(namespace, "fine", node, gpu_devices=[1], gpu_fraction=0.5, pool="p"),
    ], [], [])  # fmt: skip

    binds = report.of("bind")
    assert [(b.name, b.ok, b.status_code) for b in binds] == [
        ("gone", False, 404), ("already", False, 409), ("fine", True, None)]  # fmt: skip
    assert binds[0].error == '404 Not Found: pods "gone" not found'
    assert "already assigned" in (binds[1].error or "")
    reasons = [(e.involved_object.name, e.reason, e.type, e.message) for e in _events(cluster, namespace)]
    failed = f'Failed to bind pod {namespace}/gone to node {node}. 404 Not Found: pods "gone" not found'
    assert ("gone", "FailedBinding", "Warning", failed) in reasons
    assert ("fine", "Scheduled", "Normal", f"Successfully assigned pod {namespace}/fine to node {node} "
            "at node-pool p") in reasons  # fmt: skip
    fine = cluster.core.read_namespaced_pod("fine", namespace)
    assert fine.spec.node_name == node
    assert {k: v for k, v in fine.metadata.annotations.items() if k.startswith("kai.scheduler/")} == {
        "kai.scheduler/gpu-devices": "1", "kai.scheduler/gpu-fraction": "0.5"}  # fmt: skip
    assert cluster.core.read_namespaced_pod("already", namespace).spec.node_name == elsewhere


def test_binds_go_out_concurrently_each_with_its_own_result_and_event(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    node_names = [nodes.make(f"gpu-{i}") for i in range(4)]
    pods = [f"p{i:02d}" for i in range(40)]
    for pod in pods:
        cluster.core.create_namespaced_pod(namespace, pod_body(pod, scheduler_name, gpus=1))
    backend.observe()
    # p17 is re-created after observe: its bind carries the old uid and is refused (409).
    cluster.core.delete_namespaced_pod("p17", namespace, grace_period_seconds=0)
    only = "metadata.name=p17"
    wait_until(lambda: not cluster.core.list_namespaced_pod(namespace, field_selector=only).items, "p17 gone")
    cluster.core.create_namespaced_pod(namespace, pod_body("p17", scheduler_name, gpus=1))
    in_flight, most = 0, 0
    lock = threading.Lock()
    real = backend.writes.bind

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                in_flight -= 1

    backend.writes.bind = counting  # type: ignore[method-assign]
    binds = [Bind(namespace, pod, node_names[i % 4], gpu_devices=[i % 8]) for i, pod in enumerate(pods)]

    report = backend.apply(binds, [], [])

    assert most > 1, "binds went out one at a time"
    results = report.of("bind")
    assert [r.name for r in results] == pods  # reported in the binds' order
    assert [r.name for r in results if not r.ok] == ["p17"]
    assert results[17].status_code == 409
    for i, pod in enumerate(pods):
        bound = cluster.core.read_namespaced_pod(pod, namespace)
        if pod == "p17":
            assert bound.spec.node_name is None
        else:
            assert bound.spec.node_name == node_names[i % 4]
            assert bound.metadata.annotations["received-resource-type"] == "Regular"
    reasons = sorted((e.involved_object.name, e.reason) for e in _events(cluster, namespace))
    bound = [(p, reason) for p in pods if p != "p17" for reason in ("Bound", "Scheduled")]
    assert reasons == sorted(bound + [("p17", "FailedBinding")])
    assert len(report.of("event")) == 40 + 39 and all(e.ok for e in report.of("event"))


def test_a_watch_lagging_behind_our_binds_never_shows_a_bound_pod_pending_again(
    cluster: Cluster,
    namespace: str,
    nodes: Nodes,
    scheduler_name: str,
    backend: KubernetesBackend,
    monkeypatch: Any,
) -> None:
    """A scheduler treats its own successful bind as done until its informer catches up
    (kube-scheduler's "assumed" pods; KAI's cache marks the pod bound). Under a burst the next
    cycle's short watch window can end before the bind's event arrives, or deliver an older one:
    the pod must not look pending, or the next cycle binds it again and is refused (409)."""
    node = nodes.make("gpu-1")
    cluster.core.create_namespaced_pod(namespace, pod_body("p1", scheduler_name, gpus=1))
    backend.observe()
    before_bind = cluster.core.api_client.sanitize_for_serialization(
        cluster.core.read_namespaced_pod("p1", namespace)
    )
    assert backend.apply([Bind(namespace, "p1", node, gpu_devices=[2])], [], []).ok

    real_watch = backend.lister.watch

    def lagging(resource_version: str, list_call: Any, apply_event: Any, *args: Any, **kw: Any) -> str:
        if list_call != backend.core.list_pod_for_all_namespaces:
            return real_watch(resource_version, list_call, apply_event, *args, **kw)
        apply_event("MODIFIED", before_bind)  # an event older than the bind, and nothing newer
        return resource_version

    monkeypatch.setattr(backend.lister, "watch", lagging)
    stale = backend.observe().pods[namespace, "p1"]
    assert (stale.node, stale.status, stale.gpu_devices) == (node, TaskStatus.BOUND, ())

    monkeypatch.setattr(backend.lister, "watch", real_watch)
    caught_up = backend.observe().pods[namespace, "p1"]
    assert (caught_up.node, caught_up.status, caught_up.gpu_devices) == (node, TaskStatus.BOUND, ())
    assert backend.binder.bound_here == {}  # the watch showed the node: the mark is gone

    # A mark is for that pod (uid): deleted and created again under its name before the watch
    # showed the bind, the new pod is pending, not "bound".
    cluster.core.create_namespaced_pod(namespace, pod_body("p2", scheduler_name, gpus=1))
    backend.observe()
    assert backend.apply([Bind(namespace, "p2", node)], [], []).ok
    cluster.core.delete_namespaced_pod("p2", namespace, grace_period_seconds=0)
    wait_until(lambda: _gone(cluster, namespace, "p2"), "p2 deleted")
    uid = cluster.core.create_namespaced_pod(namespace, pod_body("p2", scheduler_name, gpus=1)).metadata.uid

    def seen_again() -> Any:
        pod = backend.observe().pods.get((namespace, "p2"))
        return pod if pod is not None and pod.uid == uid else None

    again = wait_until(seen_again, "the new p2 observed")
    assert (again.node, again.status) == (None, TaskStatus.PENDING)
    assert backend.binder.bound_here == {}


def _gone(cluster: Cluster, namespace: str, name: str) -> bool:
    return all(p.metadata.name != name for p in cluster.core.list_namespaced_pod(namespace).items)


def test_every_bind_goes_out_before_any_event_and_a_failed_event_never_fails_a_bind(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    """Events are notes about the binds, not part of them: no bind waits for an event (kube-scheduler
    records its events asynchronously), and an event the API server refuses is reported alone."""
    node_names = [nodes.make(f"gpu-{i}") for i in range(2)]
    pods = [f"p{i:02d}" for i in range(12)]
    for pod in [*pods, "waiting"]:
        cluster.core.create_namespaced_pod(namespace, pod_body(pod, scheduler_name, gpus=1))
    backend.observe()
    calls: list[tuple[str, str]] = []
    lock = threading.Lock()
    real_bind, real_event = backend.writes.bind, backend.writes.create_event

    def bind(namespace: str, name: str, *args: Any, **kwargs: Any) -> Any:
        with lock:
            calls.append(("bind", name))
        return real_bind(namespace, name, *args, **kwargs)

    def event(namespace: str, body: Any, *args: Any, **kwargs: Any) -> Any:
        about = body["involvedObject"]["name"]
        with lock:
            calls.append(("event", about))
        if about in ("p03", "p07"):
            raise client.ApiException(status=500, reason="Internal Server Error")
        return real_event(namespace, body, *args, **kwargs)

    backend.writes.bind = bind  # type: ignore[method-assign]
    backend.writes.create_event = event  # type: ignore[method-assign]
    binds = [Bind(namespace, pod, node_names[i % 2], gpu_devices=[i // 2]) for i, pod in enumerate(pods)]
    waiting = PodEvent(namespace, "waiting", EventType.WARNING, "Unschedulable", "no room for it")

    report = backend.apply(binds, [], [waiting])

    kinds = [kind for kind, _ in calls]
    # 12 Scheduled, 12 Bound (KAI's binder's) and one Unschedulable event, after every bind.
    assert kinds == ["bind"] * 12 + ["event"] * 25, "an event went out before every bind had"
    assert [(r.name, r.ok) for r in report.of("bind")] == [(p, True) for p in pods]
    failed = sorted((r.operation, r.name.split(".")[0], r.status_code) for r in report.failures)
    assert failed == [("event", "p03", 500)] * 2 + [("event", "p07", 500)] * 2
    for i, pod in enumerate(pods):
        assert cluster.core.read_namespaced_pod(pod, namespace).spec.node_name == node_names[i % 2]
    reasons = sorted((e.involved_object.name, e.reason) for e in _events(cluster, namespace))
    assert reasons == sorted([(p, r) for p in pods if p not in ("p03", "p07") for r in ("Bound", "Scheduled")]
                             + [("waiting", "Unschedulable")])  # fmt: skip
    conditions = cluster.core.read_namespaced_pod("waiting", namespace).status.conditions or []
    assert [(c.type, c.status, c.message) for c in conditions if c.type == "PodScheduled"] == [
        ("PodScheduled", "False", "no room for it")]  # fmt: skip


def test_writes_reuse_the_clients_connections(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    """A write's answer is read even when unused, so its connection goes back to the pool: 120 writes
    (40 binds, 80 events) open no more connections than are in flight at once. Left unread, each
    write opened its own (a TCP and TLS handshake per call on both sides: most of a bind's cost)."""
    node = nodes.make("gpu-1", gpus=64)
    pods = [f"p{i:02d}" for i in range(40)]
    for pod in pods:
        cluster.core.create_namespaced_pod(namespace, pod_body(pod, scheduler_name, gpus=1))
    backend.observe()
    manager = backend.api_client.rest_client.pool_manager

    def opened() -> int:
        # urllib3's pool container refuses plain iteration; keys() is its way
        return sum(manager.pools[key].num_connections for key in manager.pools.keys())  # noqa: SIM118

    before = opened()
    report = backend.apply([Bind(namespace, pod, node) for pod in pods], [], [])

    assert report.ok, report.failures
    assert len(report.of("bind")) == 40 and len(report.of("event")) == 80  # Scheduled and Bound
    assert opened() - before <= backend.bind_concurrency
