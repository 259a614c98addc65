"""Team admins manage members; everyone manages their own API tokens."""

from __future__ import annotations

from typing import Any

from kai_portal.accounts.models import ApiToken
from kai_portal.teams.models import Membership


def test_team_admin_adds_and_removes_a_member(world: dict, client_for: Any, django_user_model: Any) -> None:
    django_user_model.objects.create_user("carol", password="pw")
    client = client_for("team_admin")
    assert client.post("/teams/alpha/", {"username": "carol", "role": "member"}).status_code == 302
    membership = Membership.objects.get(team__slug="alpha", user__username="carol")
    client.post(f"/teams/alpha/members/{membership.pk}/", {"action": "remove"})
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_unknown_user_is_a_field_error(world: dict, client_for: Any) -> None:
    response = client_for("team_admin").post("/teams/alpha/", {"username": "nobody", "role": "member"})
    assert response.status_code == 200 and "No active user named" in response.content.decode()


def test_member_cannot_manage_members(world: dict, client_for: Any) -> None:
    membership = Membership.objects.get(user__username="anna")
    assert (
        client_for("member").post("/teams/alpha/", {"username": "bob", "role": "member"}).status_code == 403
    )
    response = client_for("member").post(f"/teams/alpha/members/{membership.pk}/", {"role": "member"})
    assert response.status_code == 403
    assert (
        client_for("outsider").post(f"/teams/alpha/members/{membership.pk}/", {"role": "member"}).status_code
        == 404
    )


def test_tokens_are_created_shown_once_and_revoked(world: dict, client_for: Any) -> None:
    client = client_for("member")
    response = client.post("/accounts/tokens/", {"name": "airflow", "read_only": "on"})
    assert response.status_code == 200 and response.context["secret"].startswith("kai_")
    token = ApiToken.objects.get(user__username="alice")
    assert token.read_only
    assert client_for("outsider").post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    client.post(f"/accounts/tokens/{token.pk}/revoke/")
    token.refresh_from_db()
    assert token.revoked_at is not None
