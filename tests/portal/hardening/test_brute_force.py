"""Brute force: wrong passwords and guessed tokens are refused with 429 (issue 14)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client

from kai_portal.accounts.models import User
from tests.portal.api.conftest import World


@pytest.fixture(autouse=True)
def fresh_throttles() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _sign_in(client: Client, password: str):
    return client.post("/accounts/login/", {"username": "ada", "password": password})


@pytest.mark.django_db
def test_the_11th_wrong_password_is_refused_and_so_is_the_right_one_after_it() -> None:
    User.objects.create_user("ada", password="right-password-123")
    client = Client()
    for attempt in range(1, 11):
        response = _sign_in(client, f"wrong-{attempt}")
        assert response.status_code == 200, attempt  # the form again, with its error
        assert "_auth_user_id" not in client.session
    eleventh = _sign_in(client, "wrong-11")
    assert eleventh.status_code == 429
    assert "Too many sign-in attempts" in eleventh.content.decode()
    right = _sign_in(client, "right-password-123")
    assert right.status_code == 429 and "_auth_user_id" not in client.session
    # Another account from the same address is not locked by ada's failures.
    User.objects.create_user("bob", password="bobs-password-123")
    other = client.post("/accounts/login/", {"username": "bob", "password": "bobs-password-123"})
    assert other.status_code == 302 and "_auth_user_id" in client.session


@pytest.mark.django_db
def test_a_success_before_the_limit_resets_the_count() -> None:
    User.objects.create_user("ada", password="right-password-123")
    client = Client()
    for attempt in range(9):
        _sign_in(client, f"wrong-{attempt}")
    assert _sign_in(client, "right-password-123").status_code == 302
    client.logout()
    for attempt in range(9):
        assert _sign_in(client, f"wrong-again-{attempt}").status_code == 200


def test_guessed_tokens_get_429_after_30_failures(world: World) -> None:
    codes = []
    for _ in range(40):
        guesser = World(secrets={"x": secrets.token_urlsafe(32)}).client("x")
        codes.append(guesser.get("/api/v1/jobs/").status_code)
    assert codes[:30] == [401] * 30 and codes[30:] == [429] * 10, codes
    # Throttled by client address: during the pause even a valid token from it is refused,
    refused = world.client("member").get("/api/v1/jobs/")
    assert refused.status_code == 429 and "Retry-After" in refused
    # and a spoofed X-Forwarded-For does not buy a fresh allowance.
    spoofed = World(secrets={"x": "nope"}).client("x").get("/api/v1/jobs/", HTTP_X_FORWARDED_FOR="10.9.8.7")
    assert spoofed.status_code == 429
    # Another address is not affected.
    other = world.client("member").get("/api/v1/jobs/", REMOTE_ADDR="10.0.0.2")
    assert other.status_code == 200
