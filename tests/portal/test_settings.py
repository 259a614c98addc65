from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from kai_portal.core import env

ROOT = Path(__file__).resolve().parents[2]


def _manage(args: list[str], extra_env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # A deployment's environment: none of the test run's debug or async-unsafe switches.
    dropped = {"DEBUG", "SECRET_KEY", "DJANGO_SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in dropped}
    clean.update(
        {
            "DJANGO_SETTINGS_MODULE": "kai_portal.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        }
    )
    clean.update(extra_env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_with_production_settings_reports_nothing(tmp_path: Path) -> None:
    result = _manage(
        ["check", "--deploy", "--fail-level", "WARNING"],
        {"SECRET_KEY": "x7!Qp2-production-like-secret-key-with-enough-entropy-0123456789"},
        tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    result = _manage(["check"], {}, tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_secret_key_can_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("x7!Qp2-file-secret-key-with-enough-entropy-for-django-0123456789\n")
    result = _manage(
        ["check", "--deploy", "--fail-level", "WARNING"], {"SECRET_KEY_FILE": str(secret)}, tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("helper", "raw", "message"),
    [
        (lambda: env.env_bool("KAI_T", False), "maybe", "is not a boolean"),
        (lambda: env.env_int("KAI_T", 5), "five", "is not an integer"),
        (lambda: env.env_int("KAI_T", 5, minimum=1), "0", "must be at least 1"),
    ],
)
def test_malformed_environment_values_are_rejected(
    monkeypatch: pytest.MonkeyPatch, helper: object, raw: str, message: str
) -> None:
    monkeypatch.setenv("KAI_T", raw)
    with pytest.raises(ImproperlyConfigured, match=message):
        helper()  # type: ignore[operator]


def test_environment_helpers_parse_good_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_B", "yes")
    monkeypatch.setenv("KAI_L", "a, b,,c")
    assert env.env_bool("KAI_B", False) is True
    assert env.env_list("KAI_L", "") == ["a", "b", "c"]
    assert env.env_int("KAI_UNSET_X", 7) == 7


def test_cache_round_trips_through_real_redis() -> None:
    from django.conf import settings

    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    cache.set("kai-test-key", {"gpus": 8}, timeout=30)
    assert cache.get("kai-test-key") == {"gpus": 8}
    cache.delete("kai-test-key")


def test_tests_run_against_postgresql() -> None:
    from django.db import connection

    assert connection.vendor == "postgresql"


def test_management_commands_run_against_the_make_run_database_with_debug(tmp_path: Path) -> None:
    # What the README tells a user: DEBUG=1 (as `make run` sets) needs no SECRET_KEY, and the
    # commands share one SQLite database (here a temporary one instead of var/db.sqlite3).
    refused = _manage(["import_queues", "-"], {}, tmp_path)
    assert refused.returncode != 0
    assert "DEBUG=1 .venv/bin/python manage.py <command>" in refused.stderr
    dev = {"DEBUG": "1"}
    assert _manage(["migrate", "--noinput"], dev, tmp_path).returncode == 0
    queues = tmp_path / "queues.yaml"
    queues.write_text(
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: research}\n"
        "spec: {resources: {gpu: {quota: 8, limit: -1, overQuotaWeight: 1}}}\n"
    )
    imported = _manage(["import_queues", str(queues)], dev, tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "1 queue(s) created" in imported.stdout
    exported = _manage(["export_queues"], dev, tmp_path)
    assert exported.returncode == 0 and "name: research" in exported.stdout, exported.stderr


def test_a_database_that_never_answers_fails_the_connection_instead_of_hanging(tmp_path: Path) -> None:
    """A hung database (a host that accepts TCP and then says nothing) must fail a connection within
    DB_CONNECT_TIMEOUT, so /readyz and a cycle report it instead of waiting for ever."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever answers the startup packet
        port = silent.getsockname()[1]
        result = _manage(
            ["shell", "-c", "from django.db import connection; connection.ensure_connection()"],
            {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{port}/kai", "DB_CONNECT_TIMEOUT": "1",
             "DEBUG": "1"},  # fmt: skip
            tmp_path,
        )
    assert result.returncode != 0
    assert "timeout expired" in result.stderr, result.stderr[-2000:]



def test_leader_election_timings_that_would_let_two_replicas_bind_are_refused(tmp_path: Path) -> None:
    """client-go's rule: a holder must give up (renew deadline) before another may take over (lease)."""
    key = {"SECRET_KEY": "x7!Qp2-production-like-secret-key-with-enough-entropy-0123456789"}
    result = _manage(["check"], {**key, "LEADER_ELECTION_LEASE_DURATION_SECONDS": "10",
                                 "LEADER_ELECTION_RENEW_DEADLINE_SECONDS": "10"}, tmp_path)  # fmt: skip
    assert result.returncode != 0
    assert "LEADER_ELECTION_RENEW_DEADLINE_SECONDS < LEADER_ELECTION_LEASE_DURATION_SECONDS" in result.stderr
    assert _manage(["check"], key, tmp_path).returncode == 0


@pytest.mark.django_db
def test_hsts_preload_is_opt_in(tmp_path: Path, client) -> None:
    """Preloading commits every subdomain to HTTPS in every browser for months: the operator's
    choice (SECURE_HSTS_PRELOAD), not a default (issue 26). check --deploy is clean either way."""
    header = client.get("/accounts/login/", secure=True)["Strict-Transport-Security"]
    assert header == "max-age=31536000; includeSubDomains"
    key = {"SECRET_KEY": "x7!Qp2-production-like-secret-key-with-enough-entropy-0123456789"}
    code = "from django.conf import settings; print(settings.SECURE_HSTS_PRELOAD)"
    show = ["shell", "--no-imports", "-c", code]
    assert _manage(show, key, tmp_path).stdout.strip() == "False"
    opted_in = {**key, "SECURE_HSTS_PRELOAD": "1"}
    assert _manage(show, opted_in, tmp_path).stdout.strip() == "True"
    check = _manage(["check", "--deploy", "--fail-level", "WARNING"], opted_in, tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
