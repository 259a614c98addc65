"""Schema-driven fuzzing: schemathesis generates requests from /api/schema/ and calls the app
in-process as a portal admin over seeded data. Every answer must be a non-5xx and match the
schema. Bounded and deterministic (derandomized, a few examples per operation)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from kai_portal.wsgi import application
from tests.portal.web.api_world import World, build_world


@pytest.fixture
def seeded(db: None) -> World:
    return build_world()


@pytest.fixture(autouse=True)
def _keep_test_connection() -> Any:
    """Calling the WSGI app directly would close the test's database connection after every
    request (Django's test client disconnects this handler the same way)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


# Generating the schema needs no database: load it once, at collection.
# Only the fuzzing phase, bounded below: the coverage phase enumerates every boundary case of
# every operation, which is thorough but takes minutes.
CONFIG = schemathesis.Config.from_dict(
    {"phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}}}
)
# The schema is for signed-in users in production settings (API_SCHEMA_PUBLIC off); loading it
# here is not what is tested.
with override_settings(API_SCHEMA_PUBLIC=True):
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, config=CONFIG)


@schema.parametrize()
@settings(
    max_examples=3,
    phases=[Phase.explicit, Phase.generate],
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_has_no_server_errors_and_matches_its_schema(case: Any, seeded: World) -> None:
    response = case.call(headers={"Authorization": f"Bearer {seeded.secrets['admin']}"})
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
