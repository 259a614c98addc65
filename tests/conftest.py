"""Shared pytest configuration.

Portal tests run with ``DJANGO_SETTINGS_MODULE=kai_portal.settings_test``
(real PostgreSQL from TEST_DATABASE_URL, real Redis from TEST_REDIS_URL).
Engine tests in tests/engine/ need no database and ignore all of this.
With an SQLite TEST_DATABASE_URL, tests marked ``postgres_only`` are skipped.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# The property tests draw the same examples on every run (``derandomize``), so a CI answer can be
# reproduced and never depends on luck (random draws found two over-commits on about one run in
# twenty, each now a test of its own in tests/engine/). Hunting for new
# counterexamples is a developer's run: ``HYPOTHESIS_PROFILE=explore`` draws fresh ones (with
# ``--hypothesis-seed=N`` to repeat one), and prints the blob that reproduces a failure.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On SQLite (``make run``'s database) skip the tests that need PostgreSQL's locks or checks."""
    try:
        from django.conf import settings

        engine = settings.DATABASES["default"]["ENGINE"]
    except Exception:  # Django not configured (engine-only runs)
        return
    if engine != "django.db.backends.sqlite3":
        return
    for item in items:
        marker = item.get_closest_marker("postgres_only")
        if marker is not None:
            reason = marker.args[0] if marker.args else "needs PostgreSQL"
            item.add_marker(pytest.mark.skip(reason=f"SQLite run: {reason}"))


@pytest.fixture
def demo_passwords(monkeypatch: pytest.MonkeyPatch) -> None:
    """``seed_demo`` refuses to run with DEBUG off (as tests run) without both demo passwords;
    these are the values ``make run`` (DEBUG on) defaults to."""
    monkeypatch.setenv("DEMO_ADMIN_PASSWORD", "admin")
    monkeypatch.setenv("DEMO_USER_PASSWORD", "demo")
