"""The preview and fit-check endpoints and page fragments: who may call them and what they answer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from rest_framework.test import APIClient

from kai_portal.queues.models import Queue
from tests.portal import factories

pytestmark = pytest.mark.django_db
LONG = timedelta(hours=2)


@pytest.fixture
def cluster(people, loop):
    factories.node("n1", gpus=8)
    dept = factories.queue("dept", gpu_quota=8)
    a = factories.queue("team-a", parent=dept, team=people["teams"]["a"], gpu_quota=8)
    b = factories.queue("team-b", parent=dept, team=people["teams"]["b"], gpu_quota=0)
    for i in range(8):
        factories.job(a, f"a{i}", duration=LONG)
    loop.run_many(2)
    for i in range(2):
        factories.job(b, f"b{i}", duration=LONG)
    loop.run_many(1)
    return a, b


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admin_previews_a_quota_change_over_the_api(people, cluster):
    response = _api(people["users"]["admin"]).post(
        "/api/v1/queues/team-a/preview/", {"gpu_quota": "4"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    shares = {q["queue"]: {s["resource"]: s for s in q["shares"]} for q in body["queues"]}
    assert shares["team-a"]["gpu"]["fair_share_after"] == 6
    assert shares["team-b"]["gpu"]["fair_share_after"] == 2
    assert len(body["would_be_evicted"]) == 2 and len(body["would_start"]) == 2
    assert body["warnings"][0]["kind"] == "quota"
    assert {"field": "gpu_quota", "old": "8", "new": "4"} in body["changes"]
    assert Queue.objects.get(name="team-a").gpu_quota == 8


@pytest.mark.parametrize(
    ("persona", "queue", "status"),
    [
        ("member", "team-a", 403),
        ("member", "team-b", 404),
        ("other", "team-b", 403),
        ("admin", "team-a", 200),
    ],
)
def test_only_admins_preview_quota_changes(people, cluster, persona, queue, status):
    response = _api(people["users"][persona]).post(f"/api/v1/queues/{queue}/preview/", {}, format="json")
    assert response.status_code == status


def test_an_invalid_change_is_a_400_with_field_errors(people, cluster):
    client = _api(people["users"]["admin"])
    shape = client.post("/api/v1/queues/team-a/preview/", {"gpu_quota": "lots"}, format="json")
    assert shape.status_code == 400 and "gpu_quota" in shape.json()
    rule = client.post("/api/v1/queues/team-a/preview/", {"gpu_limit": "2"}, format="json")
    assert rule.status_code == 400 and "gpu_limit" in rule.json()


def test_members_fit_check_a_job_over_the_api(people, cluster):
    client = _api(people["users"]["other"])
    response = client.post(
        "/api/v1/jobs/fit-check/", {"name": "try", "queue": "team-b", "gpu_count": 1}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    # team-b's fair share is 0 while team-a holds its whole 8-GPU quota: nothing to reclaim.
    assert body["verdict"] == "waits"
    # Why reclaim cannot help is the engine's own note, apart from KAI's pod group message.
    assert any("which would take it above its fair share" in note for note in body["notes"]), body
    too_big = client.post(
        "/api/v1/jobs/fit-check/", {"name": "try", "queue": "team-b", "gpu_count": 9}, format="json"
    )
    assert too_big.json()["verdict"] == "never_fits"
    assert too_big.json()["reason_code"] == "MaxNodePoolResources"


def test_fit_check_only_for_queues_the_user_may_submit_to(people, cluster):
    response = _api(people["users"]["member"]).post(
        "/api/v1/jobs/fit-check/", {"name": "try", "queue": "team-b", "gpu_count": 1}, format="json"
    )
    assert response.status_code == 400 and "queue" in response.json()
    anon = APIClient().post("/api/v1/jobs/fit-check/", {"name": "x", "queue": "team-b"}, format="json")
    assert anon.status_code in (401, 403)


def _quota_form(queue: Queue, **changes) -> dict[str, str]:
    data = {
        "name": queue.name, "display_name": queue.display_name, "parent": str(queue.parent_id or ""),
        "team": str(queue.team_id or ""), "priority": str(queue.priority),
        "preempt_min_runtime": "", "reclaim_min_runtime": "",
    }  # fmt: skip
    for r in ("gpu", "cpu", "memory"):
        for kind in ("quota", "limit", "over_quota_weight"):
            data[f"{r}_{kind}"] = str(getattr(queue, f"{r}_{kind}"))
    return {**data, **{k: str(v) for k, v in changes.items()}}


def test_the_quota_form_preview_fragment(people, cluster):
    a, _ = cluster
    client = _page(people["users"]["admin"])
    page = client.get(f"/queues/{a.name}/edit/").content.decode()
    assert "Preview impact" in page and f"/queues/{a.name}/edit/preview/" in page

    fragment = client.post(
        f"/queues/{a.name}/edit/preview/", _quota_form(a, gpu_quota=4), HTTP_HX_REQUEST="true"
    )
    html = fragment.content.decode()
    assert fragment.status_code == 200
    assert 'data-testid="preview-table"' in html and "<del>8</del> → <strong>6</strong>" in html
    assert "is below the 8 GPUs team-a uses now" in html
    assert Queue.objects.get(pk=a.pk).gpu_quota == 8

    invalid = client.post(f"/queues/{a.name}/edit/preview/", _quota_form(a, gpu_limit=2))
    assert 'data-testid="preview-errors"' in invalid.content.decode()
    assert _page(people["users"]["member"]).post(f"/queues/{a.name}/edit/preview/", {}).status_code == 403


def test_the_submit_form_fit_check_fragment(people, cluster):
    client = _page(people["users"]["other"])
    assert "/jobs/submit/fit-check/" in client.get("/jobs/submit/").content.decode()
    _, b = cluster
    data = {"queue": str(b.pk), "task_count": "1", "min_member": "1", "gpu_mode": "whole", "gpu_count": "1",
            "cpu_cores": "1", "priority_class": "train", "run_time": "30m"}  # fmt: skip
    html = client.post("/jobs/submit/fit-check/", data, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-verdict="waits"' in html and "Waits for free resources" in html
    html = client.post("/jobs/submit/fit-check/", {**data, "gpu_count": "12"}).content.decode()
    assert 'data-verdict="never_fits"' in html and "topped at 8" in html
    html = client.post("/jobs/submit/fit-check/", {**data, "gpu_count": ""}).content.decode()
    assert 'data-verdict="incomplete"' in html
