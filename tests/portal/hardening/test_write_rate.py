"""Writes per user are rate-limited (issue 26): one account sending costly writes as fast as it
can must not hold every web worker. Past ``WRITE_RATE`` a write is a 429 that says the rate and
when to retry, in the API and on the pages that submit; nothing is saved, and reads, other
users and the same user's next minute are unaffected."""

from __future__ import annotations

from django.test import Client

from kai_portal.workloads.models import Job
from tests.portal.web.api_world import World


def _job(name: str) -> dict:
    return {"name": name, "queue": "ml-train", "task_count": 1, "gpu_fraction": 0.5,
            "cpu_millicores": 1000, "memory_mib": 1024}  # fmt: skip


def test_the_api_refuses_writes_past_the_rate_and_saves_nothing(world: World, settings) -> None:
    settings.WRITE_RATE = "3/min"
    member = world.client("member")
    codes = [member.post("/api/v1/jobs/", _job(f"burst-{n}"), format="json").status_code for n in range(3)]
    assert codes == [201, 201, 201]
    refused = member.post("/api/v1/jobs/", _job("burst-3"), format="json")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    detail = refused.json()["detail"]
    assert "at most 3/min per user (WRITE_RATE)" in detail and "Nothing was saved" in detail
    assert not Job.objects.filter(name="burst-3").exists()
    # Every write counts, a manifest or a cancel as much as a submit.
    manifest = member.post("/api/v1/jobs/manifest/", "kind: Pod", content_type="application/yaml")
    assert manifest.status_code == 429
    # Reads go on; another user's writes go on.
    assert member.get("/api/v1/jobs/").status_code == 200
    assert world.client("team_admin").post("/api/v1/jobs/", _job("lead-1"), format="json").status_code == 201


def test_the_submit_pages_share_the_users_write_count(world: World, settings) -> None:
    settings.WRITE_RATE = "2/min"
    member = world.client("member")
    assert member.post("/api/v1/jobs/", _job("api-1"), format="json").status_code == 201
    page = Client()
    page.force_login(world.users["member"])
    manifest = """apiVersion: v1
kind: Pod
metadata: {name: from-page, labels: {kai.scheduler/queue: ml-train}}
spec: {containers: [{name: a, image: busybox}]}
"""
    first = page.post("/jobs/submit/yaml/", {"manifest": manifest})
    assert first.status_code == 302 and Job.objects.filter(name="from-page").exists()
    again = page.post("/jobs/submit/yaml/", {"manifest": manifest.replace("from-page", "from-page-2")})
    assert again.status_code == 429 and int(again["Retry-After"]) >= 1
    assert "at most 2/min per user (WRITE_RATE)" in again.content.decode()
    assert not Job.objects.filter(name="from-page-2").exists()
    fit = page.post("/jobs/submit/fit-check/", {"queue": "ml-train", "gpu_fraction": "0.5"})
    assert fit.status_code == 429
    assert page.get("/jobs/submit/yaml/").status_code == 200  # the form itself still shows
