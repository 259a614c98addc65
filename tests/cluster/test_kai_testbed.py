"""``make kai-up`` refuses to start KAI beside a running portal (deploy/kai-testbed/kai-up.sh).

Both answer to pods with ``schedulerName: kai-scheduler``, so one cluster runs one of them at a
time. A portal running its loop holds its leader-election Lease; here the portal's own elector
takes it as the kai-portal ServiceAccount, on the real API server, and ``kai-up.sh`` (given a
directory shaped like KAI's source, so it would get as far as building) must refuse, name the
Lease and its holder, and start and build nothing.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config

from kai_portal.cluster.backends import LeaseConfig
from kai_portal.cluster.backends.kubernetes import LeaderElector
from tests.deploy.test_kai_testbed import fake_kai

from .conftest import Cluster

REPO = Path(__file__).resolve().parents[2]
LEASE_NAMESPACE = "kai-portal"  # the portal's default LEADER_ELECTION_NAMESPACE; its Role grants Leases there


@pytest.fixture
def portal_holding_its_lease(cluster: Cluster, portal_kubeconfig: Path) -> Iterator[str]:
    """A portal replica that has just won its Lease, as its loop does at the start of a cycle."""
    api = config.new_client_from_config(config_file=str(portal_kubeconfig))
    name = f"kai-portal-kai-scheduler-{secrets.token_hex(3)}"  # its own, beside any other test's
    elector = LeaderElector(api, LeaseConfig(LEASE_NAMESPACE, name, "worker-bed-test"))
    assert elector.try_acquire_or_renew()
    yield name
    cluster.kubectl("-n", LEASE_NAMESPACE, "delete", "lease", name, "--ignore-not-found")
    api.close()


def test_kai_up_refuses_while_the_portal_holds_its_lease(
    cluster: Cluster, portal_holding_its_lease: str, tmp_path: Path
) -> None:
    k8s_dir = cluster.kubeconfig.parent
    if not (k8s_dir / "kube-apiserver.pid").exists():
        pytest.skip("kai-up.sh finds the cluster by its k8s-up.sh directory; KUBECONFIG_TEST names another")
    env = {**os.environ, "K8S_DIR": str(k8s_dir), "KAI_BED_DIR": str(tmp_path / "kai"),
           "KAI_BED_CACHE": str(tmp_path / "cache")}  # fmt: skip
    src = fake_kai(tmp_path / "kai-src")
    done = subprocess.run([str(REPO / "deploy" / "kai-testbed" / "kai-up.sh"), str(src)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "the portal's scheduling loop is running on this cluster" in done.stderr
    assert f"Lease {LEASE_NAMESPACE}/{portal_holding_its_lease} held by worker-bed-test" in done.stderr
    assert "only one may run at a time" in done.stderr
    assert not list((tmp_path / "kai").glob("*.pid")), "no KAI component may start"
    assert not (tmp_path / "cache").exists(), "nothing may be built"
