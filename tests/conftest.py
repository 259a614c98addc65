"""Shared pytest configuration.

Portal tests run with ``DJANGO_SETTINGS_MODULE=kai_portal.settings_test``
(real PostgreSQL from TEST_DATABASE_URL, real Redis from TEST_REDIS_URL).
Engine tests in tests/engine/ need no database and ignore all of this.
"""

from __future__ import annotations
