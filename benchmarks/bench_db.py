"""The PostgreSQL database a benchmark measures (``TEST_DATABASE_URL``), created when missing."""

from __future__ import annotations

import os


def ensure_postgres_database(script: str) -> None:
    """Create ``TEST_DATABASE_URL``'s database if it does not exist; refuse any other engine."""
    import dj_database_url
    import psycopg

    cfg = dj_database_url.parse(os.environ["TEST_DATABASE_URL"])
    if cfg["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit(f"{script} measures PostgreSQL: set TEST_DATABASE_URL to a postgres:// URL")
    admin = psycopg.connect(
        host=cfg["HOST"], port=cfg["PORT"] or 5432, user=cfg["USER"], password=cfg["PASSWORD"] or None,
        dbname="postgres", autocommit=True,
    )  # fmt: skip
    if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [cfg["NAME"]]).fetchone():
        admin.execute(f'CREATE DATABASE "{cfg["NAME"]}"')
    admin.close()
