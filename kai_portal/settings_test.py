"""Settings for the test suite: production settings plus real PostgreSQL and Redis.

``TEST_DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/kai_portal``)
must point at PostgreSQL; anything else stops the run with an error, because
the suite checks constraints and locking that SQLite does not have.
``TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``) backs the cache.
"""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-deployment-0123456789abcdef")
os.environ.setdefault("DEBUG", "0")

import dj_database_url  # noqa: E402, I001
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from kai_portal.settings import *  # noqa: E402, F403
from kai_portal.settings import DATABASES, env_str  # noqa: E402

_test_db = dj_database_url.parse(
    env_str("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kai_portal"), conn_max_age=0
)
if _test_db["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        f"TEST_DATABASE_URL must be a PostgreSQL URL (got engine {_test_db['ENGINE']}); "
        "the tests run against real PostgreSQL."
    )
DATABASES["default"] = _test_db

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
