"""List pages run a fixed number of queries whether they show 1 row or 20."""

from __future__ import annotations

from typing import Any

import pytest

from tests.portal import factories


def _more_jobs(world: dict, count: int) -> None:
    for i in range(count):
        factories.job(world["queues"]["alpha"], f"extra-{i}", task_count=2, min_member=1)


@pytest.mark.parametrize("extra", [0, 19])
def test_job_list(world: dict, client_for: Any, django_assert_max_num_queries: Any, extra: int) -> None:
    _more_jobs(world, extra)
    client = client_for("member")
    with django_assert_max_num_queries(12):
        assert client.get("/jobs/").status_code == 200


@pytest.mark.parametrize("extra", [0, 19])
def test_queue_list(world: dict, client_for: Any, django_assert_max_num_queries: Any, extra: int) -> None:
    for i in range(extra):
        factories.queue(f"extra-{i}", parent=world["queues"]["research"], gpu_quota=0)
    client = client_for("admin")
    with django_assert_max_num_queries(10):
        assert client.get("/queues/").status_code == 200


@pytest.mark.parametrize("extra", [0, 19])
def test_audit_list(world: dict, client_for: Any, django_assert_max_num_queries: Any, extra: int) -> None:
    for i in range(extra):
        factories.queue(f"audited-{i}", parent=world["queues"]["research"], gpu_quota=0)
    client = client_for("admin")
    with django_assert_max_num_queries(8):
        assert client.get("/audit/").status_code == 200


@pytest.mark.parametrize("pods", [1, 20])
def test_job_detail(world: dict, client_for: Any, django_assert_max_num_queries: Any, pods: int) -> None:
    job = factories.job(world["queues"]["alpha"], "wide", task_count=pods, min_member=1)
    client = client_for("member")
    with django_assert_max_num_queries(16):
        assert client.get(f"/jobs/{job.uid}/").status_code == 200


def test_overview(world: dict, client_for: Any, django_assert_max_num_queries: Any) -> None:
    client = client_for("member")
    with django_assert_max_num_queries(16):
        assert client.get("/cluster/").status_code == 200
