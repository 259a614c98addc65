"""Teams and memberships over the API."""

from __future__ import annotations

import pytest

from kai_portal.accounts import tokens
from kai_portal.accounts.models import User
from kai_portal.teams.models import Membership
from tests.portal import factories
from tests.portal.web.api_world import World


def test_team_admin_manages_members_of_their_team(world: World) -> None:
    client = world.client("team_admin")
    added = client.post(
        "/api/v1/memberships/", {"team": "ml", "user": "loner", "role": "member"}, format="json"
    )
    assert added.status_code == 201
    changed = client.patch(f"/api/v1/memberships/{added.json()['id']}/", {"role": "admin"}, format="json")
    assert changed.status_code == 200 and changed.json()["role"] == "admin"
    moved = client.patch(f"/api/v1/memberships/{added.json()['id']}/", {"team": "cv"}, format="json")
    assert moved.json()["team"] == "ml"  # team and user are fixed once created
    assert client.delete(f"/api/v1/memberships/{added.json()['id']}/").status_code == 204


def test_duplicate_membership_and_bad_role_are_400s(world: World) -> None:
    client = world.client("admin")
    dup = client.post("/api/v1/memberships/", {"team": "ml", "user": "ml-dev"}, format="json")
    assert dup.status_code == 400 and "non_field_errors" in dup.json()
    bad = client.post("/api/v1/memberships/", {"team": "ml", "user": "loner", "role": "owner"}, format="json")
    assert bad.status_code == 400 and "role" in bad.json()
    assert not Membership.objects.filter(user__username="loner").exists()


def test_team_listing_shows_member_counts_and_queues(world: World) -> None:
    teams = world.client("member").get("/api/v1/teams/").json()["results"]
    assert teams == [
        {"slug": "ml", "name": "ML", "description": "", "pod_security": "baseline", "member_count": 2,
         "queues": ["ml-spare", "ml-train"], "max_pending_tasks": None, "max_pending_tasks_per_member": None,
         "created_at": teams[0]["created_at"]}
    ]  # fmt: skip
    assert world.client("admin").get("/api/v1/memberships/?team=cv").json()["count"] == 1


def test_invalid_team_is_a_400(world: World) -> None:
    response = world.client("admin").post("/api/v1/teams/", {"slug": "has space", "name": ""}, format="json")
    assert response.status_code == 400 and {"slug", "name"} <= set(response.json())


@pytest.mark.parametrize("rows", [1, 20])
def test_team_and_membership_lists_query_count(db: None, rows: int, django_assert_max_num_queries) -> None:
    admin = User.objects.create_superuser("root", password="x")
    for i in range(rows):
        team = factories.team(f"t{i}")
        factories.queue(f"q{i}", team=team)
        team.memberships.create(user=User.objects.create_user(f"u{i}"))
    world = World(secrets={"admin": tokens.create_token(admin, "t")[1]})
    client = world.client("admin")
    with django_assert_max_num_queries(5):
        assert client.get("/api/v1/teams/").json()["count"] == rows
    with django_assert_max_num_queries(4):
        assert client.get("/api/v1/memberships/").json()["count"] == rows
