"""A bare cluster without the Lease's namespace (issue 29, item 6).

Leader election keeps its Lease in ``LEADER_ELECTION_NAMESPACE`` (``kai-portal``), which
deploy/rbac and the chart create. On a cluster without it, the portal creates it when its
account may (an admin's kubeconfig, as in README's ``make run`` on ``make k8s-up``), and
otherwise skips every cycle saying which namespace to create and how: the chart's ServiceAccount
may not create namespaces (deploy/rbac grants ``get`` only).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client, config

from kai_portal.cluster.backends import LeaseConfig
from kai_portal.cluster.backends.kubernetes import KubernetesBackend, LeaderElector
from kai_portal.scheduling.cycle import run_scheduling_cycle

from .conftest import Cluster, Nodes, pod_body

pytestmark = pytest.mark.django_db
TIMINGS = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}


def _exists(cluster: Cluster, name: str) -> bool:
    return any(n.metadata.name == name for n in cluster.core.list_namespace().items)


def test_without_the_namespace_the_service_account_skips_every_cycle_saying_what_to_create(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    settings: Any,
) -> None:  # fmt: skip
    missing = f"kai-portal-{secrets.token_hex(3)}"
    settings.LEADER_ELECTION, settings.LEADER_ELECTION_NAMESPACE = True, missing
    nodes.kwok("gpu", gpus=1)
    labels = {"kai.scheduler/queue": "team-a"}
    cluster.core.create_namespaced_pod(namespace, pod_body("waits", scheduler_name, gpus=1, labels=labels))

    run = run_scheduling_cycle(now=timezone.now())

    assert run.status == "skipped"
    assert run.error == (
        f"Not the leader: cannot renew the lease {missing}/kai-portal-{scheduler_name}: the namespace "
        f"'{missing}' (LEADER_ELECTION_NAMESPACE) does not exist and this account may not create it: "
        f"create it (kubectl create namespace {missing}, or kubectl apply -f deploy/rbac/, which makes "
        "it), or set LEADER_ELECTION_NAMESPACE to the namespace the portal runs in (the chart does)"
    )
    assert not _exists(cluster, missing)
    assert cluster.core.read_namespaced_pod("waits", namespace).spec.node_name is None  # nothing bound


def test_an_account_that_may_create_namespaces_makes_it_and_takes_the_lease(
    cluster: Cluster, portal_kubeconfig: Path
) -> None:
    missing = f"kai-portal-{secrets.token_hex(3)}"
    admin = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        elector = LeaderElector(admin, LeaseConfig(missing, "kai-portal-lease", "replica-a", **TIMINGS))
        assert elector.try_acquire_or_renew() and elector.refusal() is None
        lease = client.CoordinationV1Api(admin).read_namespaced_lease("kai-portal-lease", missing)
        assert lease.spec.holder_identity == "replica-a"
    finally:
        cluster.core.delete_namespace(missing, propagation_policy="Background")
        admin.close()
