"""Brute force: wrong passwords and guessed tokens are refused with 429 (issue 14)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client

from kai_portal.accounts.models import User
from tests.portal.web.api_world import World


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


def _guess(secret: str | None = None, **extra: str) -> int:
    guesser = World(secrets={"x": secret or secrets.token_urlsafe(32)}).client("x")
    return int(guesser.get("/api/v1/jobs/", **extra).status_code)


def test_guessed_tokens_get_429_after_30_failures_but_a_valid_token_from_there_works(world: World) -> None:
    codes = [_guess() for _ in range(40)]
    assert codes[:30] == [401] * 30 and codes[30:] == [429] * 10, codes
    # The admin at the same address (an office NAT, an ingress) is not refused for others' guesses.
    for persona in ("admin", "member"):
        response = world.client(persona).get("/api/v1/jobs/")
        assert response.status_code == 200, (persona, response.content)
    # A spoofed X-Forwarded-For (no trusted proxy configured) does not buy a fresh allowance.
    assert _guess("nope", HTTP_X_FORWARDED_FOR="10.9.8.7") == 429
    throttled = World(secrets={"x": "nope"}).client("x").get("/api/v1/jobs/")
    assert "Retry-After" in throttled and "a valid token still works" in throttled.json()["detail"]
    # Another address is not affected.
    assert _guess(REMOTE_ADDR="10.0.0.2") == 401


def test_bad_tokens_with_one_prefix_are_throttled_from_every_address(world: World) -> None:
    """Failures also count per token prefix (the 12 characters the database keeps): spreading
    guesses of one token over many addresses does not get past the rate."""
    real = world.secrets["member"]
    prefix = real[:12]
    codes = [_guess(prefix + secrets.token_urlsafe(32), REMOTE_ADDR=f"10.1.0.{n}") for n in range(1, 41)]
    assert codes[:30] == [401] * 30 and codes[30:] == [429] * 10, codes
    # The token with that prefix still works, from an address that guessed or from any other,
    assert world.client("member").get("/api/v1/jobs/", REMOTE_ADDR="10.1.0.40").status_code == 200
    assert world.client("member").get("/api/v1/jobs/", REMOTE_ADDR="10.7.7.7").status_code == 200
    # and a wrong token with another prefix from a fresh address is a plain 401.
    assert _guess(REMOTE_ADDR="10.2.0.1") == 401


@pytest.mark.django_db
def test_wrong_passwords_from_one_address_do_not_lock_the_user_out_from_another() -> None:
    User.objects.create_user("ada", password="right-password-123")
    attacker = Client(REMOTE_ADDR="198.51.100.9")
    for attempt in range(1, 12):
        response = attacker.post("/accounts/login/", {"username": "ada", "password": f"wrong-{attempt}"})
    assert response.status_code == 429
    ada = Client(REMOTE_ADDR="203.0.113.5")
    signed_in = ada.post("/accounts/login/", {"username": "ada", "password": "right-password-123"})
    assert signed_in.status_code == 302 and "_auth_user_id" in ada.session


def test_behind_one_proxy_the_forwarded_client_is_throttled_and_locked_out(world: World, settings) -> None:
    """With NUM_PROXIES=1 (the chart's default behind an ingress) every request comes from the
    ingress's address; the client is the last X-Forwarded-For entry, which the ingress wrote."""
    settings.NUM_PROXIES = 1
    ingress = {"REMOTE_ADDR": "10.42.0.7"}
    attacker = {**ingress, "HTTP_X_FORWARDED_FOR": "203.0.113.66"}
    # Tokens: the attacker's address is throttled, another client through the same ingress is not.
    codes = [_guess(**attacker) for _ in range(31)]
    assert codes[:30] == [401] * 30 and codes[30] == 429, codes
    # What the client writes itself in front of the ingress's entry changes nothing.
    assert _guess(**ingress, HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.66") == 429
    assert _guess(**ingress, HTTP_X_FORWARDED_FOR="198.51.100.20") == 401
    # Passwords: 11 wrong ones for ada from the attacker lock ada out there only.
    User.objects.create_user("ada", password="right-password-123")
    client = Client(**attacker)
    for attempt in range(1, 12):
        response = client.post("/accounts/login/", {"username": "ada", "password": f"wrong-{attempt}"})
    assert response.status_code == 429
    spoofing = Client(**ingress, HTTP_X_FORWARDED_FOR="198.51.100.20, 203.0.113.66")
    assert spoofing.post("/accounts/login/", {"username": "ada", "password": "wrong-12"}).status_code == 429
    ada = Client(**ingress, HTTP_X_FORWARDED_FOR="198.51.100.20")
    signed_in = ada.post("/accounts/login/", {"username": "ada", "password": "right-password-123"})
    assert signed_in.status_code == 302 and "_auth_user_id" in ada.session
