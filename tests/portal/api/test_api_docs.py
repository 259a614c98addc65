"""The OpenAPI schema and the browsable docs, served locally (no CDN)."""

from __future__ import annotations

from django.test import Client


def test_schema_is_openapi_3_and_documents_the_token_scheme(db: None) -> None:
    response = Client().get("/api/schema/?format=json")
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["components"]["securitySchemes"]["tokenAuth"]["scheme"] == "bearer"
    patch = schema["paths"]["/api/v1/queues/{name}/"]["patch"]
    assert any(p["name"] == "If-Match" for p in patch["parameters"]) and "409" in patch["responses"]


def test_docs_pages_use_local_static_files(db: None) -> None:
    for url in ("/api/docs/", "/api/redoc/"):
        html = Client().get(url).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html
        assert "cdn." not in html and "unpkg" not in html
