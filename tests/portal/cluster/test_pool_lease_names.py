"""The Lease of each node pool's scheduler (shards, cluster/leader_election.py): KAI names it
``<scheduler name>-<partition value>``; ours is ``<lease>-<pool>``, a valid Lease name for any
pool name, and never one Lease for two pools."""

from __future__ import annotations

import re

from kai_portal.cluster.leader_election import lease_name

DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def test_each_pool_gets_its_own_valid_lease_name(settings) -> None:
    settings.LEADER_ELECTION_LEASE_NAME = ""
    assert lease_name("kai-scheduler") == "kai-portal-kai-scheduler"
    assert lease_name("kai-scheduler", "a") == "kai-portal-kai-scheduler-a"
    names = {pool: lease_name("kai-scheduler", pool) for pool in ("a-b", "a_b", "A-b", "a.b", "x" * 63)}
    assert len(set(names.values())) == len(names), names
    for name in names.values():
        assert DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253, name
    assert names["a-b"] == "kai-portal-kai-scheduler-a-b"
    assert names["a_b"].startswith("kai-portal-kai-scheduler-a-b-")  # lowered, "-", a digest of "a_b"
    settings.LEADER_ELECTION_LEASE_NAME = "mine"
    assert lease_name("kai-scheduler", "a") == "mine-a"
