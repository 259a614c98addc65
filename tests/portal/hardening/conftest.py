"""The API test world (personas with tokens, a small queue tree) for the hardening tests."""

from __future__ import annotations

from tests.portal.web.api_world import World, world  # noqa: F401
