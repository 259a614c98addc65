"""Who may open which page: 404 for another team's things, 403 for read-only, sign-in for strangers."""

from __future__ import annotations

from typing import Any

import pytest

PAGES = {
    "overview": "/cluster/",
    "queue_list": "/queues/",
    "own_queue": "/queues/alpha-train/",
    "other_queue": "/queues/beta-train/",
    "department": "/queues/research/",
    "queue_edit": "/queues/alpha-train/edit/",
    "queue_create": "/queues/new/",
    "job_list": "/jobs/",
    "own_job": "/jobs/{alpha_job}/",
    "other_job": "/jobs/{beta_job}/",
    "submit": "/jobs/submit/",
    "submit_yaml": "/jobs/submit/yaml/",
    "team": "/teams/alpha/",
    "other_team": "/teams/beta/",
    "audit": "/audit/",
    "tokens": "/accounts/tokens/",
}

EXPECTED = {
    # page: (admin, team_admin, member)
    "overview": (200, 200, 200),
    "queue_list": (200, 200, 200),
    "own_queue": (200, 200, 200),
    "other_queue": (200, 404, 404),
    "department": (200, 200, 200),
    "queue_edit": (200, 403, 403),
    "queue_create": (200, 403, 403),
    "job_list": (200, 200, 200),
    "own_job": (200, 200, 200),
    "other_job": (200, 404, 404),
    "submit": (200, 200, 200),
    "submit_yaml": (200, 200, 200),
    "team": (200, 200, 200),
    "other_team": (200, 404, 404),
    "audit": (200, 403, 403),
    "tokens": (200, 200, 200),
}


def _url(world: dict[str, Any], page: str) -> str:
    return PAGES[page].format(alpha_job=world["jobs"]["alpha"].uid, beta_job=world["jobs"]["beta"].uid)


@pytest.mark.parametrize("page", sorted(PAGES))
@pytest.mark.parametrize("persona", ["admin", "team_admin", "member"])
def test_page_status_by_persona(world: dict, client_for: Any, page: str, persona: str) -> None:
    expected = EXPECTED[page][["admin", "team_admin", "member"].index(persona)]
    assert client_for(persona).get(_url(world, page)).status_code == expected


@pytest.mark.parametrize("page", sorted(PAGES))
def test_strangers_are_sent_to_sign_in(world: dict, client_for: Any, page: str) -> None:
    response = client_for(None).get(_url(world, page))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_header_shows_user_and_teams(world: dict, client_for: Any) -> None:
    html = client_for("team_admin").get("/cluster/").content.decode()
    assert "anna" in html and "Alpha" in html
    assert "/audit/" not in html  # admin-only nav entries are hidden


def test_member_sees_only_their_teams_jobs_in_the_list(world: dict, client_for: Any) -> None:
    html = client_for("member").get("/jobs/").content.decode()
    assert "alpha-job" in html and "beta-job" not in html


def test_member_sees_own_queue_and_department_but_not_other_team_queue(world: dict, client_for: Any) -> None:
    html = client_for("member").get("/queues/").content.decode()
    assert 'data-queue="alpha-train"' in html and 'data-queue="research"' in html
    assert 'data-queue="beta-train"' not in html


def test_sign_in_page_signs_in(world: dict, client_for: Any) -> None:
    client = client_for(None)
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw"})
    assert response.status_code == 302
    assert client.get("/cluster/").status_code == 200
