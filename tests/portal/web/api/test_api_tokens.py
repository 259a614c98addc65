"""API tokens: hashed, shown once, read-only flag, last use, revocation; session auth for browsers."""

from __future__ import annotations

import hashlib

from rest_framework.test import APIClient

from kai_portal.accounts import tokens
from kai_portal.accounts.models import ApiToken
from tests.portal.web.api_world import World


def test_token_is_stored_hashed_and_shown_once(world: World) -> None:
    response = world.client("member").post(
        "/api/v1/tokens/", {"name": "airflow", "read_only": True}, format="json"
    )
    assert response.status_code == 201
    secret = response.json()["token"]
    row = ApiToken.objects.get(pk=response.json()["id"])
    assert row.key_hash == hashlib.sha256(secret.encode()).hexdigest() and secret not in str(row.__dict__)
    assert row.prefix == secret[:12] and row.read_only
    listed = world.client("member").get("/api/v1/tokens/").json()["results"]
    assert all("token" not in t for t in listed) and {t["name"] for t in listed} == {
        "member tests",
        "airflow",
    }


def test_both_authorization_keywords_work_and_last_use_is_recorded(world: World) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.secrets['member']}")
    assert client.get("/api/v1/me/").json()["username"] == "ml-dev"
    assert ApiToken.objects.get(user=world.users["member"]).last_used_at is not None


def test_read_only_token_reads_but_cannot_write(world: World) -> None:
    _, secret = tokens.create_token(world.users["member"], "ro", read_only=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/jobs/").status_code == 200
    response = client.post("/api/v1/jobs/", {"name": "x", "queue": "ml-train"}, format="json")
    assert response.status_code == 403 and "read-only" in response.json()["detail"]


def test_revoked_and_unknown_tokens_are_401(world: World) -> None:
    client = world.client("member")
    token = ApiToken.objects.get(user=world.users["member"])
    deleted = client.delete(f"/api/v1/tokens/{token.pk}/")
    assert deleted.status_code == 204
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert tokens.revoke_token(token) is False  # idempotent
    bogus = APIClient()
    bogus.credentials(HTTP_AUTHORIZATION="Bearer kai_nope")
    assert bogus.get("/api/v1/jobs/").status_code == 401


def test_cannot_revoke_someone_elses_token(world: World) -> None:
    token = ApiToken.objects.get(user=world.users["other"])
    assert world.client("member").delete(f"/api/v1/tokens/{token.pk}/").status_code == 404


def test_session_auth_works_for_the_browser_and_needs_csrf_for_writes(world: World) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(world.users["member"])
    assert client.get("/api/v1/jobs/").status_code == 200
    response = client.post("/api/v1/jobs/", {"name": "x", "queue": "ml-train"}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_me_lists_team_roles(world: World) -> None:
    me = world.client("team_admin").get("/api/v1/me/").json()
    assert me["memberships"] == [{"team": "ml", "role": "admin"}] and me["is_portal_admin"] is False


def test_admin_creates_a_token_shown_once_and_revokes_it(world: World) -> None:
    from django.test import Client

    client = Client()
    client.force_login(world.users["admin"])
    response = client.post(
        "/admin/accounts/apitoken/add/",
        {"user": world.users["member"].pk, "name": "from admin", "read_only": "on"},
        follow=True,
    )
    text = response.content.decode()
    assert "will not be shown again" in text
    token = ApiToken.objects.get(name="from admin")
    secret = text.split("will not be shown again: ")[1][:47]
    assert token.read_only and token.key_hash == hashlib.sha256(secret.encode()).hexdigest()
    client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke_selected", "_selected_action": [token.pk]},
    )
    token.refresh_from_db()
    assert token.revoked_at is not None
