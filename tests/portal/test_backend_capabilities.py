"""The backend seam declares what each backend can do (backends/base.py); callers check it with
isinstance, and what a backend needs across cycles (its lease elector, its Queue object watch) lives
on the backend, not in a registry beside it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster import leader_election
from kai_portal.cluster.backends import LeaseHolder, NamespaceManager, QueueObjectStore
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.queue_sync import sync_queue_objects
from kai_portal.workloads.simulated_cluster import RowBackend


def _kubernetes() -> KubernetesBackend:
    return KubernetesBackend(api_client=client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))


def test_the_kubernetes_backend_declares_namespaces_queue_objects_and_a_lease() -> None:
    backend = _kubernetes()

    assert isinstance(backend, NamespaceManager)
    assert isinstance(backend, QueueObjectStore)
    assert isinstance(backend, LeaseHolder)
    assert not backend.capabilities.rows_are_the_cluster


def test_the_simulated_backend_declares_none_of_them_and_that_the_rows_are_its_cluster() -> None:
    backend = RowBackend()

    assert not isinstance(backend, NamespaceManager | QueueObjectStore | LeaseHolder)
    assert backend.capabilities.rows_are_the_cluster
    assert leader_election.elector_for(backend) is None
    sync_queue_objects(backend, datetime.now(UTC))  # nothing to read, nothing touched (no database)


def test_each_kubernetes_backend_keeps_its_own_elector(settings: Any) -> None:
    settings.LEADER_ELECTION = True
    settings.LEADER_ELECTION_IDENTITY = "replica-a"
    first, second = _kubernetes(), _kubernetes()

    elector = leader_election.elector_for(first)

    assert elector is not None and first.elector is elector
    assert leader_election.elector_for(first) is elector, "made once, then kept on the backend"
    assert leader_election.elector_for(second) is not elector
    assert elector.config.name == "kai-portal-kai-scheduler" and elector.config.identity == "replica-a"


def test_leader_election_off_gives_no_elector(settings: Any) -> None:
    settings.LEADER_ELECTION = False
    backend = _kubernetes()

    assert leader_election.elector_for(backend) is None and backend.elector is None


@pytest.mark.parametrize("operation", ["bind", "evict", "event", "condition"])
def test_the_guard_a_cycle_installs_refuses_that_backends_writes_only(operation: str) -> None:
    guarded, free = _kubernetes(), _kubernetes()
    guarded.guard_writes(lambda: "Not the leader")

    assert guarded.caller.call(operation, "ml", "p", lambda: None).error == "Not the leader"
    assert free.caller.call(operation, "ml", "p", lambda: None).ok
