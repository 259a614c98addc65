"""Nodes, GPUs, pools, cycles, decisions, job messages and the audit log: read-only lists."""

from __future__ import annotations

import pytest
from django.utils import timezone

from kai_portal.accounts import tokens
from kai_portal.accounts.models import User
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle
from tests.portal import factories
from tests.portal.web.api_world import World


def test_nodes_with_gpus_and_filters(world: World) -> None:
    client = world.client("member")
    node = client.get("/api/v1/nodes/node-1/").json()
    assert node["pool"] == "default" and [g["index"] for g in node["gpus"]] == [0, 1]
    assert client.get("/api/v1/nodes/?pool=other").json()["count"] == 0
    assert client.get("/api/v1/gpus/?node=node-1").json()["count"] == 2
    assert client.get("/api/v1/node-pools/").json()["results"][0]["node_count"] == 1


def test_decisions_and_messages_of_visible_jobs_only(world: World) -> None:
    member = world.client("member")
    decisions = member.get("/api/v1/decisions/").json()["results"]
    assert [(d["kind"], d["reason"]) for d in decisions] == [("unschedulable", "OverQuota")]
    assert member.get(f"/api/v1/decisions/?job={world.objects['ml_job'].uid}").json()["count"] == 1
    assert world.client("admin").get("/api/v1/decisions/?kind=allocated").json()["count"] == 1
    assert member.get("/api/v1/job-messages/").json()["results"][0]["reason"] == "NotEnoughResources"
    assert world.client("other").get("/api/v1/job-messages/").json()["count"] == 0


def test_audit_log_is_filterable(world: World) -> None:
    client = world.client("admin")
    queues = client.get("/api/v1/audit/?model=queue&action=create").json()
    assert queues["count"] == 4 and queues["results"][0]["model"] == "queue"
    assert client.get("/api/v1/audit/?since=notadate").status_code == 400


@pytest.mark.parametrize("rows", [1, 20])
def test_read_only_lists_query_count(db: None, rows: int, django_assert_max_num_queries) -> None:
    admin = User.objects.create_superuser("root", password="x")
    queue = factories.queue("q", gpu_quota=-1)
    now = timezone.now()
    for i in range(rows):
        node = factories.node(f"node-{i}", pool=f"pool-{i % 3}", gpus=2)
        job = factories.job(queue, f"j{i}")
        cycle = SchedulingCycle.objects.create(started_at=now, status="succeeded")
        Decision.objects.create(cycle=cycle, pod=job.pods.get(), job=job, kind="allocated", node=node,
                                evictor_job=job, evictor_queue=queue)  # fmt: skip
        JobMessage.objects.create(cycle=cycle, job=job, message="m")
        factories.team(f"t{i}")
    world = World(secrets={"admin": tokens.create_token(admin, "t")[1]})
    client = world.client("admin")
    for url, limit in [
        ("/api/v1/nodes/", 5), ("/api/v1/gpus/", 4), ("/api/v1/node-pools/", 4), ("/api/v1/cycles/", 4),
        ("/api/v1/decisions/", 4), ("/api/v1/job-messages/", 4), ("/api/v1/audit/", 4),
    ]:  # fmt: skip
        with django_assert_max_num_queries(limit):
            assert client.get(url).status_code == 200, url


def test_time_filters_accept_any_iso_offset_and_compare_in_utc(world: World) -> None:
    """PostgreSQL rejects offsets beyond ±15:59; the filter converts to UTC first (found by the fuzzer)."""
    client = world.client("admin")
    total = client.get("/api/v1/cycles/").json()["count"]
    far_offset = client.get("/api/v1/cycles/", {"until": "2999-05-22T18:48:43-19:03"})
    assert far_offset.status_code == 200 and far_offset.json()["count"] == total
    assert client.get("/api/v1/cycles/", {"since": "2999-05-22T18:48:43+19:03"}).json()["count"] == 0
    assert client.get("/api/v1/cycles/", {"until": "0001-01-01T00:10:00+01:00"}).status_code == 400
