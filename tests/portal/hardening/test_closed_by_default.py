"""What a production portal (DEBUG off, as the test settings are) shows to anyone who can reach
it (issue 26): /metrics (every queue and team, their usage) and the OpenAPI schema (every
endpoint) were open by default. Now they are closed unless the operator opens them:
``METRICS_TOKEN`` or ``METRICS_PUBLIC`` for /metrics, ``API_SCHEMA_PUBLIC`` for the schema."""

from __future__ import annotations

from django.test import Client

from tests.portal.web.api_world import World


def test_metrics_are_closed_without_a_token_and_say_how_to_open_them(db: None, settings) -> None:
    assert settings.DEBUG is False and not settings.METRICS_TOKEN
    closed = Client().get("/metrics", HTTP_HOST="10.1.2.3:8000")
    assert closed.status_code == 403
    assert "METRICS_TOKEN" in closed.content.decode() and "METRICS_PUBLIC=1" in closed.content.decode()
    assert "kai_" not in closed.content.decode()
    settings.METRICS_PUBLIC = True
    opened = Client().get("/metrics", HTTP_HOST="10.1.2.3:8000")
    assert opened.status_code == 200 and "kai_portal_cycles_total" in opened.content.decode()
    # A token, once set, is needed even where metrics were public.
    settings.METRICS_TOKEN = "scrape-me"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").status_code == 200


def test_the_api_schema_and_docs_are_for_signed_in_users(world: World, settings) -> None:
    assert settings.API_SCHEMA_PUBLIC is False
    anonymous = Client()
    schema = anonymous.get("/api/schema/?format=json")
    assert schema.status_code == 401 and "paths" not in schema.json()
    assert "API_SCHEMA_PUBLIC=1" in schema.json()["detail"]
    for url in ("/api/docs/", "/api/redoc/"):
        page = anonymous.get(url)
        assert page.status_code == 302 and page["Location"].startswith("/accounts/login/?next=/api/"), url
    # A token (automation generating a client) or a session (a person reading the docs) may.
    assert "/api/v1/jobs/" in world.client("member").get("/api/schema/?format=json").json()["paths"]
    signed_in = Client()
    signed_in.force_login(world.users["member"])
    assert signed_in.get("/api/docs/").status_code == 200
    # An operator may publish it.
    settings.API_SCHEMA_PUBLIC = True
    assert "/api/v1/jobs/" in anonymous.get("/api/schema/?format=json").json()["paths"]
    assert anonymous.get("/api/redoc/").status_code == 200
