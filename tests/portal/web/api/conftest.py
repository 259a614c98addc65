"""The API-wide tests (permission matrix, schema fuzzing, CLI, docs, tokens) run on the API world."""

from tests.portal.web.api_world import world  # noqa: F401
