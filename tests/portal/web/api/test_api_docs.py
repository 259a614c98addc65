"""The OpenAPI schema and the browsable docs, served locally (no CDN)."""

from __future__ import annotations

from typing import Any

from django.test import Client


def test_schema_is_openapi_3_and_documents_the_token_scheme(world: Any) -> None:
    response = world.client("member").get("/api/schema/?format=json")
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["components"]["securitySchemes"]["tokenAuth"]["scheme"] == "bearer"
    patch = schema["paths"]["/api/v1/queues/{name}/"]["patch"]
    assert any(p["name"] == "If-Match" for p in patch["parameters"]) and "409" in patch["responses"]


def test_docs_pages_use_local_static_files(world: Any) -> None:
    client = Client()
    client.force_login(world.users["member"])
    for url in ("/api/docs/", "/api/redoc/"):
        html = client.get(url).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html
        assert "cdn." not in html and "unpkg" not in html


def test_the_api_root_lists_every_collection_and_each_answers(world: Any) -> None:
    """The README names /api/v1/ as the REST API; it answered 404 (every app router's root view is
    off, as they share the prefix). Now it lists the collections, each reachable with a token."""
    assert world.client("member").get("/api/v1/").status_code == 200
    client = world.client("admin")  # the audit log is for admins only
    root = client.get("/api/v1/")
    assert root.status_code == 200, root.content
    links = root.json()
    assert {"jobs", "queues", "teams", "nodes", "tokens", "docs", "schema", "me"} <= set(links)
    for name, url in links.items():
        answer = client.get(url)
        assert answer.status_code == 200, (name, url, answer.status_code)
    assert Client().get("/api/v1/").status_code == 401  # no token: the usual JSON refusal
