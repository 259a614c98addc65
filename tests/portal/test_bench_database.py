"""``make bench-kwok`` (and the other benchmarks that reseed PostgreSQL) empty every table of the
database ``TEST_DATABASE_URL`` names: they must refuse one they did not create (issue 29, item 6)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import dj_database_url
import psycopg
import pytest
from psycopg import sql

from benchmarks import kwok_throughput
from benchmarks.bench_db import BENCH_MARK

pytestmark = pytest.mark.postgres_only("the benchmarks measure PostgreSQL")


def _connect(dbname: str) -> psycopg.Connection:
    cfg = dj_database_url.parse(os.environ["TEST_DATABASE_URL"])
    return psycopg.connect(host=cfg["HOST"], port=cfg["PORT"] or 5432, user=cfg["USER"],
                           password=cfg["PASSWORD"] or None, dbname=dbname, autocommit=True)  # fmt: skip


@pytest.fixture
def database_name(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database name of this test's own, named by TEST_DATABASE_URL while it runs; dropped after."""
    name = f"kai_bench_guard_{secrets.token_hex(4)}"
    url = dj_database_url.parse(os.environ["TEST_DATABASE_URL"])
    monkeypatch.setenv(
        "TEST_DATABASE_URL", f"postgres://{url['USER']}@{url['HOST']}:{url['PORT'] or 5432}/{name}"
    )
    yield name
    with _connect("postgres") as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_database_the_benchmark_did_not_create_is_refused_and_keeps_its_rows(database_name: str) -> None:
    with _connect("postgres") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database_name)))
    with _connect(database_name) as someone:
        someone.execute("CREATE TABLE precious (id int)")
        someone.execute("INSERT INTO precious VALUES (1)")

    with pytest.raises(SystemExit) as refused:
        kwok_throughput.ensure_database()

    message = str(refused.value)
    assert f"TEST_DATABASE_URL names {database_name!r}, which a benchmark did not create" in message
    assert "nothing was touched" in message and "does not exist yet" in message
    with _connect(database_name) as someone:
        assert someone.execute("SELECT count(*) FROM precious").fetchone() == (1,)


def test_a_database_that_does_not_exist_is_created_marked_and_accepted_again(database_name: str) -> None:
    kwok_throughput.ensure_database()
    kwok_throughput.ensure_database()  # a second run: its own database

    with _connect("postgres") as admin:
        row = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            [database_name],
        ).fetchone()
    assert row == (BENCH_MARK,)


def test_the_page_benchmark_drops_only_a_database_a_benchmark_made(database_name: str) -> None:
    """page_render.py starts from a fresh schema: it drops and recreates its own database only."""
    from benchmarks import page_render

    with _connect("postgres") as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database_name)))
    with _connect(database_name) as someone:
        someone.execute("CREATE TABLE precious (id int)")
    with pytest.raises(SystemExit, match="which a benchmark did not create"):
        page_render.ensure_database()
    with _connect(database_name) as someone:
        assert someone.execute("SELECT count(*) FROM precious").fetchone() == (0,)  # still there

    with _connect("postgres") as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database_name)))
    page_render.ensure_database()  # made, marked
    with _connect(database_name) as own:
        own.execute("CREATE TABLE leftover (id int)")
    page_render.ensure_database()  # its own: dropped and made again
    with _connect(database_name) as own:
        assert own.execute("SELECT to_regclass('leftover')").fetchone() == (None,)
