"""The background watches (backends/kubernetes/informer.py) against the real API server: the cache
follows the cluster with no cycle asking, observe() opens no watch, and only changes a cycle should
act on are reported (issue 29)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kai_portal.cluster.backends import Bind
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, pod_body, wait_until


class Changes:
    """What the watches reported, in order (on_change is called from their threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reasons: list[str] = []

    def __call__(self, reason: str) -> None:
        with self.lock:
            self.reasons.append(reason)

    def seen(self, text: str) -> bool:
        with self.lock:
            return any(text in reason for reason in self.reasons)

    def index(self, text: str) -> int:
        with self.lock:
            return next(i for i, reason in enumerate(self.reasons) if text in reason)

    def since(self, start: int) -> list[str]:
        with self.lock:
            return self.reasons[start:]


@pytest.fixture
def watching(backend: KubernetesBackend) -> Iterator[tuple[KubernetesBackend, Changes]]:
    changes = Changes()
    backend.start_watches(changes)
    informers = backend.cache._informers
    wait_until(lambda: all(informers[n].synced.is_set() for n in ("nodes", "pods")), "the first lists")
    yield backend, changes
    backend.stop_watches()


def _no_watch_windows(backend: KubernetesBackend, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every list or watch the cycle's own path would make (it must make none)."""
    calls: list[Any] = []
    for name in ("sync", "watch", "list_all"):
        original = getattr(backend.lister, name)

        def spy(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(backend.lister, name, spy)
    return calls


def test_a_pod_created_reaches_the_cache_with_no_cycle_asking(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str,
    watching: tuple[KubernetesBackend, Changes], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    backend, changes = watching
    calls = _no_watch_windows(backend, monkeypatch)
    node = nodes.make("gpu")
    cluster.core.create_namespaced_pod(namespace, pod_body("pending", scheduler_name, gpus=1))

    # The watch thread applied both and said so; nothing in this thread asked the API server.
    wait_until(lambda: changes.seen(f"pods added: {namespace}/pending"), "the pod's ADDED event reported")
    wait_until(lambda: changes.seen(f"nodes added: {node}"), "the node's ADDED event reported")
    state = backend.observe()
    assert (namespace, "pending") in state.pods and state.pods[(namespace, "pending")].node is None
    assert node in state.nodes
    assert calls == []  # observe() read the informers' copy: no list, no watch window


def test_binds_and_running_pods_are_no_change_but_finished_and_deleted_pods_are(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str,
    watching: tuple[KubernetesBackend, Changes],
) -> None:  # fmt: skip
    backend, changes = watching
    core = cluster.core
    node = nodes.kwok("gpu")
    core.create_namespaced_pod(namespace, pod_body("job", scheduler_name, gpus=1))
    wait_until(lambda: changes.seen(f"{namespace}/job"), "the pod reported")
    start = len(changes.since(0))

    backend.observe()  # a cycle's view, then its bind
    report = backend.apply([Bind(namespace, "job", node, gpu_devices=[0])], [], [])
    assert all(result.ok for result in report.results), report.results
    wait_until(lambda: core.read_namespaced_pod("job", namespace).status.phase == "Running", "KWOK runs it")
    # Events arrive in order on one watch: once the marker is reported, the bind's and KWOK's
    # updates of "job" were applied before it, and reported nothing.
    core.create_namespaced_pod(namespace, pod_body("marker", scheduler_name, gpus=1))
    wait_until(lambda: changes.seen(f"{namespace}/marker"), "the marker reported")
    assert not [r for r in changes.since(start) if f"{namespace}/job" in r]
    assert backend.observe().pods[(namespace, "job")].node == node

    core.delete_namespaced_pod("job", namespace, grace_period_seconds=0)
    wait_until(lambda: changes.seen(f"pods deleted: {namespace}/job"), "the deletion reported")
    assert (namespace, "job") not in backend.observe().pods


def test_a_node_heartbeat_is_no_change_but_a_cordon_is(
    cluster: Cluster, nodes: Nodes, watching: tuple[KubernetesBackend, Changes]
) -> None:
    backend, changes = watching
    core = cluster.core
    node = nodes.kwok("gpu")
    # Events arrive in order on the nodes' watch: a node made after is reported after them.
    first = nodes.make("marker-a")
    wait_until(lambda: changes.seen(f"nodes added: {first}"), "the first marker reported")
    start = len(changes.since(0))
    heartbeat = {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
    core.patch_node_status(node, {"status": {"conditions": [heartbeat]}})
    second = nodes.make("marker-b")
    wait_until(lambda: changes.seen(f"nodes added: {second}"), "the second marker reported")
    assert not [r for r in changes.since(start) if node in r]  # only its heartbeat moved

    core.patch_node(node, {"spec": {"unschedulable": True}})
    wait_until(lambda: backend.observe().nodes[node].unschedulable, "the cordon applied in the background")
    wait_until(lambda: f"nodes modified: {node}" in changes.since(start), "the cordon reported")
