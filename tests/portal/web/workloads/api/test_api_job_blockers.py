"""The job detail over the API carries what blocks a pending job, as the job page shows it and under
the same access rules: another team's protected job is "a job of another team" (no name, no uid);
what would change it includes another pool with room. Real cycles on the simulated cluster."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from kai_portal.accounts import tokens
from kai_portal.accounts.models import User
from kai_portal.teams.models import Membership
from tests.portal import factories
from tests.portal.scheduling.conftest import Loop, free_cycle_lock  # noqa: F401 (autouse: no lock held)

pytestmark = pytest.mark.django_db

PROTECTION = timedelta(minutes=30)


def _client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.create_token(user, 'test')[1]}")
    return client


def test_job_detail_names_the_blockers_as_the_page_does() -> None:
    factories.node("n1", gpus=8)
    factories.node("s1", pool="spare", gpus=8)
    mine, theirs = factories.team("mine"), factories.team("theirs")
    me = User.objects.create_user("me", password="pw")
    them = User.objects.create_user("them", password="pw")
    admin = User.objects.create_superuser("root", password="pw")
    Membership(team=mine, user=me).save()
    Membership(team=theirs, user=them).save()
    dept = factories.queue("dept", gpu_quota=8)
    a = factories.queue("q-theirs", parent=dept, team=theirs, gpu_quota=0, reclaim_min_runtime=PROTECTION)
    b = factories.queue("q-mine", parent=dept, team=mine, gpu_quota=8)
    loop = Loop()
    old = factories.job(a, "old-train", gpu_count=8, duration=timedelta(hours=4), submitter=them)
    loop.run(0)
    loop.run(5)
    old.refresh_from_db()
    want = factories.job(b, "want", gpu_count=8, duration=timedelta(minutes=10), submitter=me)
    loop.run(60)
    until = (old.started_at + PROTECTION).replace(microsecond=0)

    def blockers(user: User) -> Any:
        response = _client(user).get(f"/api/v1/jobs/{want.uid}/")
        assert response.status_code == 200, response.content
        return response.json()["blockers"]

    mine_view = blockers(me)
    (prot,) = mine_view["protected"]
    assert prot["job"] is None and prot["uid"] is None  # another team's job: not named
    assert (prot["queue"], prot["action"], prot["until"]) == ("q-theirs", "reclaim", until.isoformat())
    assert "old-train" not in str(mine_view)
    assert (
        "queue q-theirs uses 8 GPUs with a fair share of 0: reclaim may take from it" in mine_view["sources"]
    )
    assert (
        "Another pool: pool spare has 8 idle whole GPUs on one node this job may use, enough for its 8 GPUs "
        "now; moving needs a queue in pool spare." in mine_view["changes"]
    )
    assert any(
        c.startswith("Time: the first protected job becomes reclaimable") for c in mine_view["changes"]
    )
    (admin_prot,) = blockers(admin)["protected"]
    assert (admin_prot["job"], admin_prot["uid"]) == ("old-train", str(old.uid))
    # Another team's member may not see the job at all; a running job has none; lists leave it out.
    assert _client(them).get(f"/api/v1/jobs/{want.uid}/").status_code == 404
    assert _client(them).get(f"/api/v1/jobs/{old.uid}/").json()["blockers"] is None
    listed = _client(me).get("/api/v1/jobs/").json()["results"]
    assert listed and all("blockers" not in row for row in listed)
