"""The background watches' faults (backends/kubernetes/informer.py), on kmock: a real API server
answers 410 Gone only once etcd has compacted past the watch's version, and does not fail a list or
drop a watch on demand. The emulator closes every watch at once (a dropped watch, each time) and is
told when to answer 410 or fail a call. Asserted on what the cache holds and on how often the
informer listed, never on time."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes.informer import Informer
from tests.cluster.conftest import wait_until

from .conftest import make_node
from .emulator import KubeApiEmulator


class Changes(list[str]):
    lock = threading.Lock()

    def __call__(self, reason: str) -> None:
        with self.lock:
            self.append(reason)


@pytest.fixture
def changes() -> Changes:
    return Changes()


@pytest.fixture
def nodes_informer(backend: KubernetesBackend, changes: Changes) -> Iterator[Informer]:
    backend.start_watches(changes)
    yield backend.cache._informers["nodes"]
    _stop(backend)


def _stop(backend: KubernetesBackend) -> None:
    """Stop every informer and wait for its thread (the emulator then shuts down with no request open)."""
    backend.stop_watches()
    informers = [*backend.cache._informers.values(), backend.queue_objects.informer]
    alive = [i.name for i in informers if i is not None and not i.join(30)]
    assert not alive, alive


def test_a_dropped_watch_resumes_from_its_version_without_listing_again(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend,
    nodes_informer: Informer, changes: Changes,
) -> None:  # fmt: skip
    wait_until(nodes_informer.synced.is_set, "the first list")
    make_node(core, "a")
    wait_until(lambda: "nodes added: a" in changes, "node a reported")
    make_node(core, "b")
    wait_until(lambda: "nodes added: b" in changes, "node b reported")
    # The emulator closed every watch at once: each next one resumed from the last version seen.
    assert nodes_informer.relists == 1
    assert {"a", "b"} <= set(backend.observe().nodes)


def test_a_410_gone_lists_again_and_nothing_is_lost(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend,
    nodes_informer: Informer, changes: Changes,
) -> None:  # fmt: skip
    wait_until(nodes_informer.synced.is_set, "the first list")
    make_node(core, "before")
    wait_until(lambda: "nodes added: before" in changes, "the first node reported")
    # Compaction past the informer's version: its next watch is answered 410 Gone.
    emulator.compacted_below = emulator.version + 2
    make_node(core, "during")
    make_node(core, "after")
    core.delete_node("before")
    wait_until(lambda: nodes_informer.relists == 2, "a list after the 410")
    state = backend.observe()
    assert {"during", "after"} <= set(state.nodes) and "before" not in state.nodes
    assert "nodes listed" in changes[changes.index("nodes added: before") :]  # a list is a change


def test_a_failing_list_is_retried_until_it_succeeds(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend, changes: Changes,
) -> None:  # fmt: skip
    make_node(core, "a")
    emulator.faults[("GET", "/api/v1/nodes")] = 500  # the first list of nodes fails
    backend.start_watches(changes)
    try:
        informer = backend.cache._informers["nodes"]
        wait_until(informer.synced.is_set, "the list after the failure")
        assert informer.relists == 1 and "a" in backend.observe().nodes
        assert ("GET", "/api/v1/nodes") not in emulator.faults  # the fault was met, then retried
    finally:
        _stop(backend)
