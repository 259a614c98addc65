"""Shards in kubernetes mode (issue 30): one scheduler per node pool, each under its own Lease.

As KAI's ``SchedulingShard``: each pool's scheduler (here a thread with its own backend, API client
and Lease candidate, as ``manage.py run_scheduler --pool NAME`` runs it) holds the Lease
``kai-portal-<scheduler>-<pool>`` in the portal's namespace, observes only its pool's nodes and the
pods of its pool's queues, and binds and evicts only there. Two pools' schedulers lead at the same
time; one pool's scheduler failing or losing its Lease never stops the other pool's binds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kai_portal.cluster.backends import Bind, LeaseConfig
from kai_portal.cluster.backends.kubernetes import KubernetesBackend, LeaderElector
from kai_portal.cluster.leader_election import elector_for
from kai_portal.history.models import SchedulingCycle
from kai_portal.nodes.models import Node, NodePool
from kai_portal.scheduling import cycle as cycle_module
from kai_portal.workloads import configured_backend
from kai_portal.workloads.models import Pod
from tests.portal import factories

from .conftest import Cluster, Nodes, pod_body, wait_until
from .scheduler_thread import SchedulerThread

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only("two pools' schedulers on one database need PostgreSQL's locks"),
]
LEASE_NAMESPACE = "kai-portal"
POOL_LABEL = "kai.scheduler/node-pool"


class PoolScheduler(SchedulerThread):
    """One pool's scheduler, its Lease the one the settings derive for the pool."""

    def __init__(self, pool: str, kubeconfig: Path, scheduler_name: str) -> None:
        super().__init__(f"scheduler-{pool}", kubeconfig, scheduler_name)
        self.pool = pool
        self.backend.scope_to_pool(pool)
        elector = elector_for(self.backend)
        assert isinstance(elector, LeaderElector)
        self.elector = elector
        self.binds: list[tuple[str, str]] = []  # (pod, node) of every bind call that reached the server

    def note_bind(self, pod: str, node: str) -> None:
        self.binds.append((pod, node))

    def one_cycle(self) -> SchedulingCycle:
        return cycle_module.run_scheduling_cycle(now=timezone.now(), backend=self.backend, pool=self.pool)


@pytest.fixture
def pools(portal: Any, settings: Any) -> tuple[str, str]:
    """Pools a and b, each with a queue (qa in a, qb in b) and shards on."""
    settings.SCHEDULING_SHARDS = True
    settings.FORECAST_AFTER_CYCLE = False
    settings.LEADER_ELECTION_IDENTITY = ""  # the host name: one process, two Leases
    settings.LEADER_ELECTION_LEASE_DURATION_SECONDS = 5
    settings.LEADER_ELECTION_RENEW_DEADLINE_SECONDS = 3
    settings.LEADER_ELECTION_RETRY_PERIOD_SECONDS = 1
    for pool in ("a", "b"):
        factories.queue(f"q{pool}", node_pool=NodePool.objects.get_or_create(name=pool)[0], gpu_quota=8)
    return "a", "b"


@pytest.fixture
def schedulers(
    cluster: Cluster, pools: tuple[str, str], portal_kubeconfig: Path, scheduler_name: str
) -> Iterator[dict[str, PoolScheduler]]:
    running = {pool: PoolScheduler(pool, portal_kubeconfig, scheduler_name) for pool in pools}
    yield running
    for scheduler in running.values():
        if scheduler.is_alive():
            scheduler.stopped.set()
            scheduler.join(30)
    for pool in pools:
        try:
            client.CoordinationV1Api(cluster.api).delete_namespaced_lease(
                f"kai-portal-{scheduler_name}-{pool}", LEASE_NAMESPACE
            )
        except ApiException as error:
            if error.status != 404:
                raise


def _create(cluster: Cluster, namespace: str, scheduler_name: str, names: list[str], queue: str) -> None:
    for name in names:
        body = pod_body(name, scheduler_name, gpus=1, labels={"kai.scheduler/queue": queue})
        cluster.core.create_namespaced_pod(namespace, body)


def _bound(cluster: Cluster, namespace: str, names: list[str]) -> dict[str, str | None]:
    return {n: cluster.core.read_namespaced_pod(n, namespace).spec.node_name for n in names}


def test_two_pools_schedulers_hold_their_own_leases_at_once_and_bind_only_their_pool(
    cluster: Cluster, schedulers: dict[str, PoolScheduler], namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """Each pool's scheduler leads its own Lease while the other leads its own, and binds only its
    pool's pods onto its pool's nodes; each writes the rows of its pool only."""
    node_a = nodes.kwok("node-a", gpus=4, labels={POOL_LABEL: "a"})
    node_b = nodes.kwok("node-b", gpus=4, labels={POOL_LABEL: "b"})
    a, b = schedulers["a"], schedulers["b"]
    assert (a.elector.config.name, b.elector.config.name) == (
        f"kai-portal-{scheduler_name}-a", f"kai-portal-{scheduler_name}-b")  # fmt: skip
    pods_a, pods_b = [f"a{i}" for i in range(3)], [f"b{i}" for i in range(3)]
    _create(cluster, namespace, scheduler_name, pods_a, "qa")
    _create(cluster, namespace, scheduler_name, pods_b, "qb")
    a.start()
    b.start()
    wait_until(
        lambda: all(_bound(cluster, namespace, pods_a + pods_b).values()), "both pools' pods to be bound"
    )
    # Both Leases are held at once, each by its own pool's scheduler.
    wait_until(lambda: a.elector.is_leader() and b.elector.is_leader(), "both pools' schedulers to lead")
    coordination = client.CoordinationV1Api(cluster.api)
    for pool in ("a", "b"):
        lease = coordination.read_namespaced_lease(f"kai-portal-{scheduler_name}-{pool}", LEASE_NAMESPACE)
        assert lease.spec.holder_identity == schedulers[pool].elector.config.identity
    a.finish()
    b.finish()
    assert sorted(a.binds) == sorted((p, node_a) for p in pods_a)
    assert sorted(b.binds) == sorted((p, node_b) for p in pods_b)
    # Each pool's cycles ran (none skipped for the other's Lease or lock) and wrote its own rows.
    for scheduler in (a, b):
        assert scheduler.cycles and all(status == "succeeded" for status, _ in scheduler.cycles), (
            scheduler.cycles
        )
    assert set(SchedulingCycle.objects.values_list("pool", flat=True)) == {"a", "b"}
    assert dict(Node.objects.values_list("name", "pool__name")) == {node_a: "a", node_b: "b"}
    rows = dict(Pod.objects.values_list("name", "node__name"))
    assert rows == {**{p: node_a for p in pods_a}, **{p: node_b for p in pods_b}}


def test_one_pools_scheduler_losing_its_lease_or_stopping_never_stops_the_others_binds(
    cluster: Cluster, schedulers: dict[str, PoolScheduler], namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """B's scheduler is cut off from its Lease (it must stop binding within its renew deadline),
    then stops altogether; A's scheduler binds pool a's new pods all along."""
    nodes.kwok("node-a", gpus=8, labels={POOL_LABEL: "a"})
    nodes.kwok("node-b", gpus=8, labels={POOL_LABEL: "b"})
    a, b = schedulers["a"], schedulers["b"]
    a.start()
    b.start()
    wait_until(lambda: a.elector.is_leader() and b.elector.is_leader(), "both pools' schedulers to lead")
    b.cut_off_from_the_lease()
    wait_until(lambda: not b.elector.is_leader(), "B to stop leading (renew deadline)", timeout=10)
    late_a = [f"a-late{i}" for i in range(4)]
    _create(cluster, namespace, scheduler_name, late_a, "qa")
    _create(cluster, namespace, scheduler_name, ["b-own"], "qb")
    wait_until(lambda: all(_bound(cluster, namespace, late_a).values()), "A to bind while B is cut off")
    time.sleep(2)  # B has had several cycles to bind its pod
    assert _bound(cluster, namespace, ["b-own"]) == {"b-own": None}
    assert all(pod != "b-own" for pod, _ in b.binds)
    assert any(status == "skipped" and "cannot renew the lease" in error for status, error in b.cycles)
    # B stops altogether: A goes on binding.
    b.finish()
    _create(cluster, namespace, scheduler_name, ["a-after"], "qa")
    wait_until(lambda: _bound(cluster, namespace, ["a-after"])["a-after"], "A to bind after B stopped")
    a.finish()
    assert {pod for pod, _ in a.binds} == {*late_a, "a-after"}
    assert all(status == "succeeded" for status, _ in a.cycles), a.cycles


def test_a_pools_backend_refuses_to_bind_onto_another_pools_node(
    cluster: Cluster, pools: tuple[str, str], portal_kubeconfig: Path, scheduler_name: str,
    namespace: str, nodes: Nodes,
) -> None:  # fmt: skip
    """Defence in depth: pool a's backend refuses a bind onto pool b's node and an eviction of a
    pod on pool b's node, whatever asks it; nothing reaches the server."""
    node_b = nodes.kwok("node-b", gpus=4, labels={POOL_LABEL: "b"})
    _create(cluster, namespace, scheduler_name, ["stray"], "qb")
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    try:
        backend = KubernetesBackend(api_client=api, scheduler_name=scheduler_name)
        backend.scope_to_pool("a")
        backend.observe()
        report = backend.apply([Bind(namespace, "stray", node_b, [0])], [], [])
    finally:
        api.close()
    refused = [r for r in report.results if r.operation == "bind"]
    assert len(refused) == 1 and not refused[0].ok
    assert f"node {node_b} is in node pool 'b'" in (refused[0].error or "")
    assert _bound(cluster, namespace, ["stray"]) == {"stray": None}


def test_a_pools_scheduler_and_a_whole_cluster_scheduler_never_schedule_side_by_side(
    cluster: Cluster, pools: tuple[str, str], portal_kubeconfig: Path, scheduler_name: str,
    namespace: str, nodes: Nodes,
) -> None:  # fmt: skip
    """Their Leases differ, so neither excludes the other by its own: a pool's cycle is skipped while
    a replica without shards holds the whole cluster's Lease (mid-rollout, say); once it is gone the
    pool's scheduler binds; a whole-cluster scheduler that does not lead yet is skipped while a
    pool's Lease is held. Each says which Lease and what to do."""
    node_a = nodes.kwok("node-a", gpus=4, labels={POOL_LABEL: "a"})
    _create(cluster, namespace, scheduler_name, ["mixed"], "qa")
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    coordination = client.CoordinationV1Api(cluster.api)
    whole, of_a = f"kai-portal-{scheduler_name}", f"kai-portal-{scheduler_name}-a"
    timings = {"lease_duration": 5.0, "renew_deadline": 3.0, "retry_period": 1.0}
    try:
        old = LeaderElector(api, LeaseConfig(LEASE_NAMESPACE, whole, "old-replica", **timings))
        assert old.try_acquire_or_renew()
        pool_a = PoolScheduler("a", portal_kubeconfig, scheduler_name)
        skipped = cycle_module.run_scheduling_cycle(now=timezone.now(), backend=pool_a.backend, pool="a")
        assert skipped.status == "skipped", skipped.error
        assert f"the whole cluster's Lease {LEASE_NAMESPACE}/{whole} is held by old-replica" in skipped.error
        assert "run every scheduler with the same SCHEDULING_SHARDS" in skipped.error
        assert not pool_a.binds and _bound(cluster, namespace, ["mixed"]) == {"mixed": None}
        with pytest.raises(ApiException) as untaken:  # it waited without taking its own pool's Lease
            coordination.read_namespaced_lease(of_a, LEASE_NAMESPACE)
        assert untaken.value.status == 404

        # Once that Lease is gone, pool a's own scheduler binds (and holds its pool's Lease).
        coordination.delete_namespaced_lease(whole, LEASE_NAMESPACE)
        ran = cycle_module.run_scheduling_cycle(now=timezone.now(), backend=pool_a.backend, pool="a")
        assert ran.status == "succeeded", ran.error
        assert pool_a.binds == [("mixed", node_a)]

        # The other way round: a whole-cluster scheduler (another replica, no shards) that does not
        # lead yet waits while a pool's Lease is held, and takes no Lease.
        _create(cluster, namespace, scheduler_name, ["mixed-2"], "qa")
        unscoped = KubernetesBackend(api_client=api, scheduler_name=scheduler_name)
        unscoped.elector = LeaderElector(api, LeaseConfig(LEASE_NAMESPACE, whole, "whole-replica", **timings))
        waiting = cycle_module.run_scheduling_cycle(now=timezone.now(), backend=unscoped)
        assert waiting.status == "skipped", waiting.error
        holder = pool_a.elector.config.identity
        assert f"a node pool's Lease {LEASE_NAMESPACE}/{of_a} is held by {holder}" in waiting.error
        assert _bound(cluster, namespace, ["mixed-2"]) == {"mixed-2": None}
        with pytest.raises(ApiException) as absent:
            coordination.read_namespaced_lease(whole, LEASE_NAMESPACE)
        assert absent.value.status == 404
        pool_a.api.close()
    finally:
        api.close()
        for name in (whole, of_a):
            try:
                coordination.delete_namespaced_lease(name, LEASE_NAMESPACE)
            except ApiException as error:
                if error.status != 404:
                    raise


def test_a_node_relabelled_to_another_pool_keeps_its_row_and_moves_with_its_pods(
    cluster: Cluster, schedulers: dict[str, PoolScheduler], namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """Pool a's sync never takes a node that moved to pool b (or b's pods) for gone: the row stays,
    b's sync moves it (same row, its pod still on it), and no pod row ends."""
    moving = nodes.kwok("node-m", gpus=4, labels={POOL_LABEL: "a"})
    a, b = schedulers["a"], schedulers["b"]
    _create(cluster, namespace, scheduler_name, ["on-m"], "qa")

    def cycle(scheduler: PoolScheduler) -> None:
        run = cycle_module.run_scheduling_cycle(
            now=timezone.now(), backend=scheduler.backend, pool=scheduler.pool
        )
        assert run.status == "succeeded", run.error

    cycle(a)
    cycle(b)
    wait_until(lambda: _bound(cluster, namespace, ["on-m"])["on-m"], "pool a to bind on-m")
    row = Node.objects.get(name=moving)
    cluster.core.patch_node(moving, {"metadata": {"labels": {POOL_LABEL: "b"}}})
    wait_until(lambda: moving not in a.backend.observe().nodes, "pool a's watch to see the node leave")
    cycle(a)
    assert Node.objects.get(name=moving).pk == row.pk and Node.objects.get(name=moving).pool.name == "a"
    cycle(b)
    moved = Node.objects.get(name=moving)
    assert (moved.pk, moved.pool.name) == (row.pk, "b")
    pod = Pod.objects.get(name="on-m")
    assert pod.node_id == row.pk and pod.state in ("bound", "running")
    a.api.close()
    b.api.close()


def test_run_scheduler_with_two_pools_runs_a_scheduler_per_pool_each_under_its_own_lease(
    cluster: Cluster, pools: tuple[str, str], namespace: str, scheduler_name: str, nodes: Nodes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """``manage.py run_scheduler --pool a --pool b`` in kubernetes mode (the chart runs one per
    Deployment): each pool's loop has its own backend and watches, holds the pool's own Lease and
    binds its pool's pods onto its pool's nodes."""
    monkeypatch.setattr(configured_backend, "_pool_backends", {})
    node_a = nodes.kwok("node-a", gpus=4, labels={POOL_LABEL: "a"})
    node_b = nodes.kwok("node-b", gpus=4, labels={POOL_LABEL: "b"})
    _create(cluster, namespace, scheduler_name, ["ra"], "qa")
    _create(cluster, namespace, scheduler_name, ["rb"], "qb")
    out = StringIO()
    try:
        call_command("run_scheduler", pool=["a", "b"], cycles=2, interval=0.5, stdout=out)
    finally:
        for backend in configured_backend._pool_backends.values():
            assert isinstance(backend, KubernetesBackend)
            backend.api_client.close()
    assert _bound(cluster, namespace, ["ra", "rb"]) == {"ra": node_a, "rb": node_b}, out.getvalue()
    assert sorted(SchedulingCycle.objects.values_list("pool", "status")) == [
        ("a", "succeeded"), ("a", "succeeded"), ("b", "succeeded"), ("b", "succeeded")]  # fmt: skip
    coordination = client.CoordinationV1Api(cluster.api)
    for pool in pools:
        lease = coordination.read_namespaced_lease(f"kai-portal-{scheduler_name}-{pool}", LEASE_NAMESPACE)
        assert lease.spec.holder_identity
        coordination.delete_namespaced_lease(f"kai-portal-{scheduler_name}-{pool}", LEASE_NAMESPACE)
