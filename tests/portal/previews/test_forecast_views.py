"""The forecast on the job page, in the jobs list and in the API; other teams' jobs are only counted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from kai_portal.teams.models import Membership
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(loop, department, django_user_model):
    cache.clear()
    factories.node("n1", gpus=2)
    alpha, beta = factories.team("alpha"), factories.team("beta")
    alice = django_user_model.objects.create_user("alice", password="pw")
    Membership(team=alpha, user=alice).save()
    qa = factories.queue("qa", parent=department, team=alpha, gpu_quota=2)
    qb = factories.queue("qb", parent=department, team=beta, gpu_quota=2)
    running = factories.job(qa, "running", gpu_count=2, duration=timedelta(seconds=300))
    loop.run()
    loop.run(5)
    other = factories.job(qb, "secret-beta-job", gpu_count=2, duration=timedelta(seconds=60))
    loop.run(1)
    mine = factories.job(qa, "mine", gpu_count=2, duration=timedelta(seconds=60))
    loop.run(1)
    return {"alice": alice, "running": running, "other": other, "mine": mine}


def test_job_page_list_and_api_show_position_and_estimated_start(setup, loop):
    mine = setup["mine"]
    c = Client()
    c.force_login(setup["alice"])
    html = c.get(f"/jobs/{mine.uid}/").content.decode()
    assert 'data-testid="job-forecast"' in html
    assert "secret-beta-job" not in html
    assert "1 job of other teams" in html or "of other teams" in html

    listing = c.get("/jobs/").content.decode()
    assert "Est. start" in listing and 'data-testid="est-start"' in listing

    api = APIClient()
    api.force_authenticate(setup["alice"])
    body = api.get(f"/api/v1/jobs/{mine.uid}/forecast/").json()
    assert body["queue_position"] == 1 and body["cluster_pending"] == 2
    assert body["ahead_other_teams"] + len(body["ahead_visible"]) == body["jobs_ahead"]
    assert all(j["name"] != "secret-beta-job" for j in body["ahead_visible"])
    assert body["estimated_start"] is not None
    detail = api.get(f"/api/v1/jobs/{mine.uid}/").json()
    assert detail["forecast"]["estimated_start"] == body["estimated_start"]
    running = api.get(f"/api/v1/jobs/{setup['running'].uid}/")
    assert running.json()["forecast"] is None
    assert api.get(f"/api/v1/jobs/{setup['running'].uid}/forecast/").status_code == 409
