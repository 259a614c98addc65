"""The namespace of a job, shown (issue 29, item 6): two jobs of one name from two namespaces,
as KAI's examples make them (``gpu-sharing`` applied by two teams), are told apart in the jobs
API, both job lists, the CSV and the job page. A simulated job's namespace is its queue's name,
as the scheduling messages name it."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client

from kai_portal.workloads.models import Job
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs() -> dict[str, Job]:
    queue = factories.queue("default-queue", gpu_quota=8)
    made = {
        ns: factories.job(queue, "gpu-sharing", namespace=ns, cluster_key=f"{ns}/Pod/gpu-sharing")
        for ns in ("team-b", "team-a")
    }
    made["simulated"] = factories.job(factories.queue("vision", gpu_quota=8), "train")
    return made


@pytest.fixture
def admin(django_user_model: Any) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_the_jobs_api_names_each_jobs_namespace(jobs: dict[str, Job], admin: Client) -> None:
    rows = admin.get("/api/v1/jobs/?ordering=created_at").json()["results"]
    assert [(r["name"], r["namespace"]) for r in rows] == [
        ("gpu-sharing", "team-b"), ("gpu-sharing", "team-a"), ("train", "vision")
    ]  # fmt: skip
    one = admin.get(f"/api/v1/jobs/{jobs['team-a'].uid}/").json()
    assert (one["name"], one["namespace"], one["queue"]) == ("gpu-sharing", "team-a", "default-queue")


def test_the_namespace_is_read_only_in_the_api(jobs: dict[str, Job], admin: Client) -> None:
    uid = jobs["simulated"].uid
    admin.patch(f"/api/v1/jobs/{uid}/", {"namespace": "kube-system"}, content_type="application/json")
    assert Job.objects.get(uid=uid).namespace == ""


def test_the_workloads_table_has_a_namespace_column_that_sorts(jobs: dict[str, Job], admin: Client) -> None:
    page = admin.get("/jobs/table/?sort=namespace")
    assert [(j.name, j.pod_namespace) for j in page.context["jobs"]] == [
        ("gpu-sharing", "team-a"), ("gpu-sharing", "team-b"), ("train", "vision")
    ]  # fmt: skip
    html = page.content.decode()
    assert 'data-sort="namespace">Namespace</a>' in html
    assert "<td>team-a</td>" in html and "<td>team-b</td>" in html
    body = b"".join(admin.get("/jobs/table.csv").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert sorted((r["name"], r["namespace"]) for r in rows) == [
        ("gpu-sharing", "team-a"), ("gpu-sharing", "team-b"), ("train", "vision")
    ]  # fmt: skip


def test_the_job_list_and_the_job_page_show_the_namespace(jobs: dict[str, Job], admin: Client) -> None:
    listing = admin.get("/jobs/").content.decode()
    assert "<th>Namespace</th>" in listing and "<td>team-a</td>" in listing and "<td>team-b</td>" in listing
    page = admin.get(f"/jobs/{jobs['team-b'].uid}/").content.decode()
    assert "<dt>Namespace</dt><dd>team-b</dd>" in page
