"""Two portal replicas never both bind (issue 16): leader election on a coordination.k8s.io Lease,
against the real API server, as client-go's leaderelection (and so KAI's components) do it.

Two replicas (threads with their own backend, API client and identity) run cycles side by side on
one database. Their cycle locks do not exclude each other on purpose: replica B has lost Redis and
runs under the database fallback lock while A holds the Redis lock, which is the case the Lease
is for. A pod is bindable once, so a second bind would show as a refused (409) FailedBinding.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kai_portal.cluster.backends import LeaseConfig
from kai_portal.cluster.backends.kubernetes import LeaderElector
from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling import cycle as cycle_module
from kai_portal.scheduling.lock import HeldLock

from .conftest import Cluster, Nodes, pod_body, wait_until
from .scheduler_thread import SchedulerThread

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only("two replicas on one database need PostgreSQL's locks"),
]
LEASE_NAMESPACE = "kai-portal"  # the ServiceAccount's namespace: deploy/rbac's Role grants Leases there
TIMINGS = {"lease_duration": 5.0, "renew_deadline": 3.0, "retry_period": 1.0}
NO_REDIS = "redis://127.0.0.1:1/0"  # refused at once: that replica's cycle lock falls back to PostgreSQL


class Replica(SchedulerThread):
    """One portal replica: its own lease candidate and Redis URL for its cycle lock."""

    def __init__(self, identity: str, kubeconfig: Path, scheduler_name: str, lease: str, redis_url: str,
                 locks: threading.local) -> None:  # fmt: skip
        super().__init__(identity, kubeconfig, scheduler_name)
        self.identity, self.redis_url, self.locks = identity, redis_url, locks
        self.elector = LeaderElector(self.api, LeaseConfig(LEASE_NAMESPACE, lease, identity, **TIMINGS))
        self.backend.elector = self.elector  # this replica's own candidate, not the settings'
        self.binds: list[tuple[str, float]] = []  # (pod, when) of every bind call that reached the server
        self.led_from: float | None = None  # when it first won the lease
        renew = self.elector.try_acquire_or_renew

        def recording_renew() -> bool:
            won = renew()
            if won and self.led_from is None:
                self.led_from = time.monotonic()
            return won

        self.elector.try_acquire_or_renew = recording_renew  # type: ignore[method-assign]

    def note_bind(self, pod: str, node: str) -> None:
        self.binds.append((pod, time.monotonic()))

    def before_cycles(self) -> None:
        self.locks.redis_url = self.redis_url


@pytest.fixture
def replicas(
    cluster: Cluster, portal: Any, portal_kubeconfig: Path, scheduler_name: str,
    settings: Any, monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Replica, Replica]]:  # fmt: skip
    settings.FORECAST_AFTER_CYCLE = False
    locks = threading.local()
    real_lock = cycle_module.cycle_lock

    def per_replica_lock(pool: str | None = None) -> AbstractContextManager[HeldLock]:
        return real_lock(getattr(locks, "redis_url", None), pool=pool)

    monkeypatch.setattr(cycle_module, "cycle_lock", per_replica_lock)
    lease = f"kai-portal-{scheduler_name}"
    a = Replica("replica-a", portal_kubeconfig, scheduler_name, lease, settings.REDIS_URL, locks)
    b = Replica("replica-b", portal_kubeconfig, scheduler_name, lease, NO_REDIS, locks)
    yield a, b
    for replica in (a, b):
        if replica.is_alive():
            replica.stopped.set()
            replica.join(30)
    try:
        client.CoordinationV1Api(cluster.api).delete_namespaced_lease(lease, LEASE_NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise


def test_two_replicas_never_both_bind_and_the_other_takes_over_after_the_lease_expires(
    cluster: Cluster, replicas: tuple[Replica, Replica], namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """client-go leader election: one holder binds; the other skips its cycles saying who holds the
    lease; a holder that cannot renew stops binding (renew deadline 3 s) before the other may take
    over (lease duration 5 s after it last saw a renewal), and then the other binds."""
    core = cluster.core
    nodes.kwok("gpu-1", gpus=8)
    a, b = replicas
    labels = {"kai.scheduler/queue": "team-a"}

    def create(names: list[str], every: float = 0.0) -> None:
        for name in names:
            core.create_namespaced_pod(namespace, pod_body(name, scheduler_name, gpus=1, labels=labels))
            time.sleep(every)

    def all_bound(names: list[str]) -> bool:
        return all(core.read_namespaced_pod(n, namespace).spec.node_name for n in names)

    a.start()
    wait_until(a.elector.is_leader, "replica A to take the lease")
    b.start()
    first = [f"p{i}" for i in range(4)]
    create(first)
    wait_until(lambda: all_bound(first), "the leader to bind the first pods", timeout=60)
    assert {pod for pod, _ in a.binds} == set(first) and not b.binds
    assert b.led_from is None and b.cycles
    assert all(status == "skipped" and "held by replica-a" in error for status, error in b.cycles)

    # A loses the Lease API but keeps cycling (it still reaches pods and nodes).
    a.cut_off_from_the_lease()
    second = [f"q{i}" for i in range(4)]
    create(second, every=1.5)  # over 6 s: before A's deadline, in the gap, after B's takeover
    wait_until(lambda: all_bound(second), "the pods created around the takeover to be bound", timeout=60)
    a.finish()
    b.finish()

    assert b.led_from is not None, "replica B never took the lease over"
    # A's last successful renewal (one in flight at the cut may have landed after it).
    last_renewal = a.elector.renewed_at
    assert last_renewal is not None
    # Fail closed: A's last bind is within its renew deadline, and before B could lead.
    a_last_bind = max(when for _, when in a.binds)
    assert a_last_bind < last_renewal + TIMINGS["renew_deadline"] < b.led_from
    assert b.led_from - last_renewal >= TIMINGS["lease_duration"]
    # Every pod was bound by exactly one replica, once; the server refused nothing.
    bound = [pod for pod, _ in a.binds + b.binds]
    assert sorted(bound) == sorted(first + second)
    assert {pod for pod, _ in b.binds} and all(when > b.led_from for _, when in b.binds)
    events = [e for e in core.list_namespaced_event(namespace).items if e.involved_object.kind == "Pod"]
    assert sorted((e.involved_object.name, e.reason, e.count) for e in events) == sorted(
        (name, reason, 1) for name in first + second for reason in ("Scheduled", "Bound"))  # fmt: skip
    # Both replicas' skipped cycles are on record with the reason.
    reasons = set(SchedulingCycle.objects.filter(status="skipped").values_list("error", flat=True))
    assert any("cannot renew the lease" in r for r in reasons), reasons
    assert any("held by replica-a" in r for r in reasons), reasons
    lease = client.CoordinationV1Api(cluster.api).read_namespaced_lease(
        f"kai-portal-{scheduler_name}", LEASE_NAMESPACE)  # fmt: skip
    # Created by A (0 transitions), taken over once by B.
    assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("replica-b", 1)


def test_candidates_racing_for_the_lease_get_exactly_one_winner(
    cluster: Cluster, portal_kubeconfig: Path, scheduler_name: str
) -> None:
    """Lease writes carry the resourceVersion they read, so of candidates that race (for a new lease,
    or to take over an expired one) the API server lets one win and answers the others 409."""
    lease = f"kai-portal-{scheduler_name}-race"
    clock = [0.0]  # the candidates' monotonic clock, moved by hand to expire the holder
    apis = [config.new_client_from_config(config_file=str(portal_kubeconfig)) for _ in range(4)]
    electors = [
        LeaderElector(api, LeaseConfig(LEASE_NAMESPACE, lease, f"c{i}", **TIMINGS), clock=lambda: clock[0])
        for i, api in enumerate(apis)
    ]

    def race(candidates: list[LeaderElector]) -> list[bool]:
        barrier = threading.Barrier(len(candidates))
        won: dict[int, bool] = {}

        def run(i: int) -> None:
            barrier.wait()
            won[i] = candidates[i].try_acquire_or_renew()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(candidates))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        return [won[i] for i in range(len(candidates))]

    coordination = client.CoordinationV1Api(cluster.api)
    try:
        first = race(electors)
        assert first.count(True) == 1, first
        holder = electors[first.index(True)]
        assert coordination.read_namespaced_lease(lease, LEASE_NAMESPACE).spec.holder_identity == (
            holder.config.identity)  # fmt: skip
        others = [e for e in electors if e is not holder]
        assert [e.try_acquire_or_renew() for e in others] == [False] * 3  # each has now seen the record
        assert all("held by " + holder.config.identity in (e.refusal() or "") for e in others)

        clock[0] += TIMINGS["lease_duration"] + 1  # the holder went quiet for longer than the lease
        assert not holder.is_leader()  # it gave up at its renew deadline, before anyone could take over
        second = race(others)
        assert second.count(True) == 1, second
        winner = others[second.index(True)].config.identity
        record = coordination.read_namespaced_lease(lease, LEASE_NAMESPACE).spec
        assert (record.holder_identity, record.lease_transitions) == (winner, 1)
    finally:
        try:
            coordination.delete_namespaced_lease(lease, LEASE_NAMESPACE)
        except ApiException as error:
            if error.status != 404:
                raise
        for api in apis:
            api.close()
