"""Settings for the test suite: production settings plus real databases and Redis.

``TEST_DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/kai_portal``)
points at PostgreSQL (the production database; the whole suite runs there) or at
an SQLite file (``sqlite:////abs/path.sqlite3``: ``make run``'s database, with
its options). ``make test`` runs the browser journeys, the page, forecast and
scheduling-loop tests a second time on SQLite with DEBUG on (``-o django_debug_mode=true``), as
``make run`` serves; tests marked ``postgres_only`` (row and advisory locks,
constraints SQLite does not enforce the same way) are skipped there.
``TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``) backs the cache.
"""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-deployment-0123456789abcdef")
os.environ.setdefault("DEBUG", "0")

import dj_database_url  # noqa: E402, I001
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from kai_portal.settings import *  # noqa: E402, F403
from kai_portal.settings import DATABASES, SQLITE_OPTIONS, env_int, env_str  # noqa: E402

_test_db = dj_database_url.parse(
    env_str("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kai_portal"), conn_max_age=0
)
if _test_db["ENGINE"] == "django.db.backends.sqlite3":
    if not _test_db["NAME"] or _test_db["NAME"] == ":memory:":
        raise ImproperlyConfigured(
            "TEST_DATABASE_URL for SQLite must name a file (sqlite:////abs/path.sqlite3): the live "
            "server and the scheduling loop run in other threads, which an in-memory database cannot share."
        )
    # A file, as under ``make run``; the test database is that file (created and destroyed by pytest).
    _test_db["TEST"] = {"NAME": _test_db["NAME"]}
    _test_db["OPTIONS"] = dict(SQLITE_OPTIONS)
elif _test_db["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        f"TEST_DATABASE_URL must be a PostgreSQL or SQLite URL (got engine {_test_db['ENGINE']})."
    )
DATABASES["default"] = _test_db

# Test-only: a cycle sleeps this long between planning and persisting, so a test can restart
# Redis or start another cycle while one runs (tests/portal/scheduling/test_fencing_redis_restart.py).
CYCLE_TEST_PAUSE_SECONDS = env_int("KAI_TEST_CYCLE_PAUSE_SECONDS", 0, minimum=0)

TEST_REDIS_URL = env_str("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
REDIS_URL = TEST_REDIS_URL
CELERY_BROKER_URL = TEST_REDIS_URL
CACHES = {
    "default": {
        # Redis down = cache misses, not errors (core/cache.py); connecting gives up fast.
        "BACKEND": "kai_portal.core.cache.DegradingRedisCache",
        "LOCATION": TEST_REDIS_URL,
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 2},
        "KEY_PREFIX": "kai-test",
    }
}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
SECURE_SSL_REDIRECT = False
# whitenoise warns when STATIC_ROOT is missing; tests never run collectstatic.
STATIC_ROOT = VAR_DIR / "test-staticfiles"  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
