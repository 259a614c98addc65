"""Jobs and pods over the API: submit, validation, cancel (409), filters, query counts."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from kai_portal.accounts import tokens
from kai_portal.accounts.models import User
from kai_portal.teams.models import Membership
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories
from tests.portal.web.api_world import World


def test_submit_creates_the_job_and_its_pods_as_the_caller(world: World) -> None:
    response = world.client("member").post(
        "/api/v1/jobs/",
        {"name": "bert", "queue": "ml-train", "task_count": 3, "min_member": 2, "gpu_fraction": 0.5,
         "cpu_millicores": 2000, "memory_mib": 4096, "priority_class": "build"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["submitter"] == "ml-dev" and body["team"] == "ml" and body["state"] == "pending"
    assert body["priority"] == 100 and body["pods"] == {"total": 3, "pending": 3, "running": 0, "finished": 0}
    assert Pod.objects.filter(job__uid=body["uid"]).count() == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpu_count": 1, "gpu_fraction": 0.5}, "gpu_fraction"),
        ({"task_count": 2, "min_member": 3}, "min_member"),
        ({"gpu_fraction": 1.5}, "gpu_fraction"),
        ({"queue": "cv-train"}, "queue"),
        ({"queue": "research"}, "queue"),
        ({"priority_class": "urgent"}, "priority_class"),
        ({"task_count": 0}, "task_count"),
        ({"name": ""}, "name"),
    ],
)
def test_invalid_submission_is_a_400_on_the_field_and_nothing_is_saved(
    world: World, body: dict, field: str
) -> None:
    jobs, pods = Job.objects.count(), Pod.objects.count()
    response = world.client("member").post(
        "/api/v1/jobs/", {"name": "x", "queue": "ml-train", **body}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert (Job.objects.count(), Pod.objects.count()) == (jobs, pods)


def test_cancelling_a_finished_job_is_a_409(world: World) -> None:
    client = world.client("member")
    url = f"/api/v1/jobs/{world.objects['ml_job'].uid}/cancel/"
    first = client.post(url)
    assert first.status_code == 200 and first.json()["state"] == "cancelled"
    again = client.post(url)
    assert again.status_code == 409 and "cannot be cancelled" in again.json()["detail"]


def test_members_list_only_their_teams_jobs_and_filters_apply(world: World) -> None:
    client = world.client("member")
    names = {j["name"] for j in client.get("/api/v1/jobs/").json()["results"]}
    assert names == {"ml-by-member", "ml-by-lead"}
    mine = client.get("/api/v1/jobs/?submitter=ml-dev").json()["results"]
    assert [j["name"] for j in mine] == ["ml-by-member"]
    assert client.get("/api/v1/jobs/?team=cv").json()["count"] == 0
    assert client.get("/api/v1/jobs/?state=running").json()["count"] == 0
    assert client.get("/api/v1/jobs/?state=bogus").status_code == 400
    ordered = client.get("/api/v1/jobs/?ordering=name").json()["results"]
    assert [j["name"] for j in ordered] == ["ml-by-lead", "ml-by-member"]


def test_pods_of_a_job_and_pod_filters(world: World) -> None:
    client = world.client("member")
    job = world.objects["ml_job"]
    pods = client.get(f"/api/v1/jobs/{job.uid}/pods/").json()["results"]
    assert [p["name"] for p in pods] == [f"{job.name}-0"] and pods[0]["job"] == str(job.uid)
    assert client.get(f"/api/v1/pods/?job={job.uid}").json()["count"] == 1
    assert client.get("/api/v1/pods/?queue=cv-train").json()["count"] == 0


def test_pagination_has_a_sane_maximum(world: World) -> None:
    body = world.client("admin").get("/api/v1/jobs/?page_size=100000").json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert world.client("admin").get("/api/v1/jobs/?page=99").status_code == 404


@pytest.mark.parametrize("rows", [1, 20])
def test_job_and_pod_lists_query_count_does_not_grow_with_rows(
    db: None, rows: int, django_assert_max_num_queries
) -> None:
    member = User.objects.create_user("dev", password="x")
    team = factories.team("ml")
    team.memberships.create(user=member)
    queue = factories.queue("ml-train", team=team, gpu_quota=-1)
    node = factories.node("node-1", gpus=1)
    for i in range(rows):
        job = factories.job(queue, f"job-{i}", submitter=member, task_count=2, min_member=1)
        pod = job.pods.first()
        pod.node = node
        pod.save()
        pod.gpu_devices.add(node.gpus.first())
    world = World(secrets={"member": tokens.create_token(member, "t")[1]})
    client = world.client("member")
    with django_assert_max_num_queries(5):
        assert client.get("/api/v1/jobs/").json()["count"] == rows
    with django_assert_max_num_queries(6):
        assert client.get("/api/v1/pods/").json()["count"] == rows * 2


def _job_list_sql(client: Any, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return [q["sql"] for q in ctx.captured_queries if 'FROM "workloads_job"' in q["sql"]]


@pytest.mark.parametrize("persona", ["member", "admin"])
@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/jobs/?state=pending&queue=ml-train", "/jobs/"])
def test_job_list_sql_neither_joins_pods_nor_uses_distinct(world: World, persona: str, url: str) -> None:
    """The list (API and page) and its COUNT stay proportional to the page (benchmarks/api-load.md):
    pod counts in correlated subqueries, never ``LEFT JOIN pods ... GROUP BY job``; the access rule
    as a subquery on memberships, never a join that needs ``DISTINCT``."""
    if url.startswith("/api/"):
        client = world.client(persona)
    else:
        client = Client()
        client.force_login(world.users[persona])
    statements = _job_list_sql(client, url)
    assert statements, "no job query captured"
    for sql in statements:
        assert "DISTINCT" not in sql.upper(), sql
        assert 'JOIN "workloads_pod"' not in sql, sql
        assert 'JOIN "teams_membership"' not in sql, sql
        assert 'GROUP BY "workloads_job"' not in sql, sql
    counts = [sql for sql in statements if sql.startswith("SELECT COUNT(*)")]
    assert counts and all("workloads_pod" not in sql for sql in counts), counts


def test_job_list_pod_counts_by_state(world: World) -> None:
    job = factories.job(
        world.objects["ml_q"], "wide", submitter=world.users["member"], task_count=6, min_member=1
    )
    states = ["pending", "bound", "running", "succeeded", "failed", "pending"]
    for pod, state in zip(job.pods.order_by("index"), states, strict=True):
        pod.state = state
        pod.save(update_fields=["state"])
    rows = {j["name"]: j for j in world.client("member").get("/api/v1/jobs/").json()["results"]}
    assert rows["wide"]["pods"] == {"total": 6, "pending": 2, "running": 2, "finished": 2}
    assert rows["ml-by-member"]["pods"] == {"total": 1, "pending": 1, "running": 0, "finished": 0}
    one = world.client("member").get(f"/api/v1/jobs/{job.uid}/").json()
    assert one["pods"] == rows["wide"]["pods"]


def test_job_list_forecasts_match_the_single_job_answer(world: World) -> None:
    """The page's forecasts are computed in one batch; each equals what the job's own GET says."""
    client = world.client("admin")
    listed = {j["uid"]: j["forecast"] for j in client.get("/api/v1/jobs/").json()["results"]}
    assert len(listed) == 3
    for uid, fc in listed.items():
        single = client.get(f"/api/v1/jobs/{uid}/").json()
        assert single["forecast"] == fc
        assert (fc is None) == (single["state"] != "pending")
    assert any(fc is not None and "cluster_position" in fc for fc in listed.values())


def test_access_rules_return_each_job_once(world: World) -> None:
    """Without DISTINCT the rules must still not repeat rows: a team admin who also submitted a job
    (own and team-admin rules both match) and a member of two teams each see a job once."""
    lead = world.users["team_admin"]
    Membership(team=world.objects["cv"], user=lead, role="admin").save()
    visible = list(Job.objects.visible_to(lead).values_list("name", flat=True))
    assert sorted(visible) == ["cv-job", "ml-by-lead", "ml-by-member"]
    cancellable = list(Job.objects.cancellable_by(lead).values_list("name", flat=True))
    assert sorted(cancellable) == ["cv-job", "ml-by-lead", "ml-by-member"]
    member = world.users["member"]
    assert list(Job.objects.cancellable_by(member).values_list("name", flat=True)) == ["ml-by-member"]
    assert Pod.objects.visible_to(lead).count() == 3
    assert world.client("team_admin").get("/api/v1/jobs/").json()["count"] == 3
