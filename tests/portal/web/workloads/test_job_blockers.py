"""The job page names what blocks a pending job, as the cycle's engine found it (``Job.blockers``):
the protected job it would reclaim from and when that job becomes reclaimable, the queue reclaim
may take from, the limit it would cross with what would change it. Real cycles on the simulated
cluster; both databases."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from kai_portal.nodes.models import Node
from kai_portal.teams.models import Membership
from kai_portal.workloads.models import Job
from tests.portal import factories
from tests.portal.scheduling.conftest import Loop, free_cycle_lock  # noqa: F401 (autouse: no lock held)

pytestmark = pytest.mark.django_db

PROTECTION = timedelta(minutes=30)


@pytest.fixture
def cluster(django_user_model: Any) -> dict[str, Any]:
    factories.node("n1", gpus=8)
    mine, theirs = factories.team("mine"), factories.team("theirs")
    me = django_user_model.objects.create_user("me", password="pw")
    them = django_user_model.objects.create_user("them", password="pw")
    Membership(team=mine, user=me).save()
    Membership(team=theirs, user=them).save()
    dept = factories.queue("dept", gpu_quota=8)
    a = factories.queue("q-theirs", parent=dept, team=theirs, gpu_quota=0, reclaim_min_runtime=PROTECTION)
    b = factories.queue("q-mine", parent=dept, team=mine, gpu_quota=8)
    return {
        "me": me,
        "them": them,
        "a": a,
        "b": b,
        "admin": django_user_model.objects.create_superuser("root", "r@x", "pw"),
    }


def _page(user: Any, job: Job) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/jobs/{job.uid}/")
    assert response.status_code == 200
    return response.content.decode()


def test_page_names_the_protected_job_and_when_it_becomes_reclaimable(cluster: dict[str, Any]) -> None:
    loop = Loop()
    old = factories.job(
        cluster["a"], "old-train", gpu_count=8, duration=timedelta(hours=4), submitter=cluster["them"]
    )
    loop.run(0)
    loop.run(5)
    old.refresh_from_db()
    assert old.state == "running" and old.started_at is not None
    want = factories.job(
        cluster["b"], "want", gpu_count=8, duration=timedelta(minutes=10), submitter=cluster["me"]
    )
    loop.run(60)
    want.refresh_from_db()
    assert want.state == "pending"
    items = want.blockers["items"]
    (prot,) = [i for i in items if i["kind"] == "protected"]
    until = old.started_at + PROTECTION
    assert prot["job_id"] == old.pk and prot["action"] == "reclaim" and prot["queue"] == "q-theirs"
    assert prot["until"] == until.replace(microsecond=0).isoformat()
    # The admin sees the job by name, with a link; the time it becomes reclaimable; what changes it.
    admin_page = _page(cluster["admin"], want)
    assert f'href="/jobs/{old.uid}/">old-train</a> in queue q-theirs' in admin_page
    assert f"{until:%Y-%m-%d %H:%M:%S}" in admin_page
    assert "queue q-theirs uses 8 GPUs with a fair share of 0: reclaim may take from it" in admin_page
    assert "the first protected job becomes reclaimable" in admin_page
    # A member of another team learns when, not whose job.
    my_page = _page(cluster["me"], want)
    assert "A job of another team</a>" not in my_page and "old-train" not in my_page
    assert "A job of another team in queue q-theirs" in my_page and f"{until:%Y-%m-%d %H:%M:%S}" in my_page
    # The blocker stays the same from cycle to cycle (no rewrite), and goes once protection ends.
    loop.run(60)
    want.refresh_from_db()
    assert [i for i in want.blockers["items"] if i["kind"] == "protected"] == [prot]
    loop.now = until - timedelta(seconds=1)
    loop.run(0)
    want.refresh_from_db()
    assert want.state == "pending"
    loop.now = until
    loop.run(5)
    want.refresh_from_db()
    assert want.blockers is None
    old.refresh_from_db()
    assert old.state == "pending" and old.last_evicted_at is not None


def test_page_names_the_limit_and_the_sizes_that_would_fit(cluster: dict[str, Any]) -> None:
    b = cluster["b"]
    b.gpu_quota, b.gpu_limit = 2, 4
    b.save()
    loop = Loop()
    factories.job(b, "small", gpu_count=3, duration=timedelta(hours=1), submitter=cluster["me"])
    loop.run(0)
    big = factories.job(b, "big", gpu_count=2, duration=timedelta(hours=1), submitter=cluster["me"])
    loop.run(5)
    big.refresh_from_db()
    (lim,) = [i for i in big.blockers["items"] if i["kind"] == "limit"]
    assert (lim["queue"], lim["resource"], lim["limit"], lim["allocated"], lim["requested"]) == (
        "q-mine", "gpu", 4.0, 3.0, 2.0,
    )  # fmt: skip
    page = _page(cluster["me"], big)
    assert "queue q-mine&#x27;s GPUs limit raised by 1 (from 4 to 5)" in page
    assert "at most 1 GPUs fits within the limit now" in page


def test_a_running_job_shows_no_blockers(cluster: dict[str, Any]) -> None:
    loop = Loop()
    job = factories.job(
        cluster["b"], "runs", gpu_count=1, duration=timedelta(hours=1), submitter=cluster["me"]
    )
    Job.objects.filter(pk=job.pk).update(blockers={"items": [{"kind": "note", "code": "X", "text": "stale"}]})
    loop.run(0)
    loop.run(5)
    job.refresh_from_db()
    assert job.state == "running" and job.blockers is None
    assert 'data-testid="job-blockers"' not in _page(cluster["me"], job)


def test_a_capacity_wait_names_the_smaller_request_and_the_pool_with_room(cluster: dict[str, Any]) -> None:
    # n1 (default pool) keeps 2 GPUs idle; pool spare has a node of 8 idle H100s, pool other one of
    # 8 idle A100s, which the job's node selector rules out.
    h100 = {"nvidia.com/gpu.product": "H100"}
    Node.objects.filter(name="n1").update(labels=h100)
    factories.node("s1", pool="spare", gpus=8, labels=h100)
    factories.node("s2", pool="other", gpus=8, labels={"nvidia.com/gpu.product": "A100"})
    loop = Loop()
    b = cluster["b"]
    factories.job(b, "first", gpu_count=6, duration=timedelta(hours=1), submitter=cluster["me"])
    loop.run(0)
    want = factories.job(
        b, "want", gpu_count=8, duration=timedelta(hours=1), submitter=cluster["me"], node_selector=h100
    )
    twin = factories.job(
        b, "twin", gpu_count=8, duration=timedelta(hours=1), submitter=cluster["me"], node_selector=h100
    )
    loop.run(5)
    want.refresh_from_db()
    twin.refresh_from_db()
    assert want.state == "pending" and twin.state == "pending"
    items = {i["kind"]: i for i in want.blockers["items"] if i["kind"] in ("smaller", "pool")}
    # alike jobs get alike items (written together)
    assert [i for i in twin.blockers["items"] if i["kind"] in ("smaller", "pool")] == list(items.values())
    assert items["smaller"] == {"kind": "smaller", "pool": "default", "pods": 1, "requested": 8, "gpus": 2}
    assert [i["pool"] for i in want.blockers["items"] if i["kind"] == "pool"] == ["spare"]
    assert (items["pool"]["idle"], items["pool"]["nodes"]) == (8, 1)
    page = _page(cluster["me"], want)
    assert (
        "A smaller request: a pod of at most 2 GPUs fits in pool default now (it asks for 8 per pod)." in page
    )
    assert (
        "Another pool: pool spare has 8 idle whole GPUs on one node this job may use, enough for its 8 GPUs "
        "now; moving needs a queue in pool spare." in page
    )
    # Once the room is taken, the next cycle says so: 2 idle GPUs go to a 2-GPU job.
    factories.job(b, "filler", gpu_count=2, duration=timedelta(hours=1), submitter=cluster["me"])
    loop.run(5)
    want.refresh_from_db()
    smaller = [i for i in want.blockers["items"] if i["kind"] == "smaller"]
    assert smaller and smaller[0]["gpus"] == 0
    assert "A smaller request does not help now: no node of pool default" in _page(cluster["me"], want)
