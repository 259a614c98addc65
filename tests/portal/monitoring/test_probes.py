"""Readiness fails (503) when the database or Redis is unreachable; liveness does not;
``manage.py worker_health`` fails once the last succeeded cycle is too old."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from kai_portal.history.models import SchedulingCycle
from tests.portal import factories

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import json, django
django.setup()
from django.test import Client
client = Client()
ready = client.get("/readyz", HTTP_HOST="10.0.0.7:8000")
live = client.get("/healthz", HTTP_HOST="10.0.0.7:8000")
print(json.dumps({"ready": ready.status_code, "body": ready.json(), "live": live.status_code}))
"""


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_of_tests() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def probe(database_url: str, redis_url: str) -> dict:
    """/readyz and /healthz of a fresh process with production settings and these service URLs."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kai_portal.settings",
        "SECRET_KEY": "probe-test-secret-key-0123456789abcdefghijklmnopqrstuvwxyz",
        "DEBUG": "0",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "LOG_LEVEL": "ERROR",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db
def test_ready_when_database_and_redis_answer():
    got = probe(database_url_of_tests(), settings.REDIS_URL)
    assert got == {
        "ready": 200,
        "live": 200,
        "body": {"status": "ok", "checks": {"database:default": "ok", "redis": "ok"}},
    }


def test_not_ready_when_the_database_is_unreachable_but_still_alive():
    got = probe(f"postgres://postgres@127.0.0.1:{closed_port()}/kai_portal", settings.REDIS_URL)
    assert got["ready"] == 503 and got["live"] == 200
    assert got["body"]["status"] == "unavailable"
    assert got["body"]["checks"]["database:default"].startswith("failed: OperationalError")
    assert got["body"]["checks"]["redis"] == "ok"


@pytest.mark.django_db
def test_still_ready_but_degraded_when_redis_is_unreachable():
    """Pages and the API work without Redis (issue 14: degrade, never 500), so a Redis outage
    must not take every web pod out of rotation; readiness says it is degraded."""
    got = probe(database_url_of_tests(), f"redis://127.0.0.1:{closed_port()}/0")
    assert got["ready"] == 200 and got["live"] == 200
    assert got["body"] == {
        "status": "degraded",
        "checks": {"database:default": "ok", "redis": "degraded: ConnectionError"},
    }


def test_the_readme_says_what_readiness_answers():
    """The README once said /readyz is 503 while Redis is unreachable; it answers 200 degraded."""
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "`/readyz` (readiness: 503 `unavailable` while PostgreSQL is unreachable; 200 `degraded`" in text
    assert "503 while PostgreSQL or Redis" not in text


@pytest.mark.django_db
def test_readyz_in_process_lists_its_checks():
    body = Client().get("/readyz").json()
    assert body == {"status": "ok", "checks": {"database:default": "ok", "redis": "ok"}}


@pytest.mark.django_db
def test_worker_health_fails_before_any_cycle(capsys):
    with pytest.raises(CommandError) as failed:
        call_command("worker_health")
    assert failed.value.returncode == 1
    assert "no scheduling cycle has succeeded yet" in str(failed.value)


@pytest.mark.django_db
def test_worker_health_passes_after_a_recent_cycle_and_fails_when_it_is_too_old(loop, capsys, settings):
    settings.CYCLE_SECONDS = 5
    leaf = factories.queue("leaf", gpu_quota=1)
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    loop.now = timezone.now() - timedelta(seconds=20)
    assert loop.run().status == "succeeded"

    call_command("worker_health")  # 20 s old, allowed 6 x 5 s
    out = capsys.readouterr().out
    assert "last cycle finished at" in out and out.strip().endswith("ok")

    with pytest.raises(CommandError) as failed:
        call_command("worker_health", "--max-age-cycles", "3")  # allowed 15 s
    assert failed.value.returncode == 1 and "stale: older than 15 s" in str(failed.value)

    # A skipped or failed cycle since then does not make the loop healthy again.
    SchedulingCycle.objects.create(started_at=timezone.now(), finished_at=timezone.now(), status="skipped")
    SchedulingCycle.objects.create(started_at=timezone.now(), finished_at=timezone.now(), status="failed")
    with pytest.raises(CommandError):
        call_command("worker_health", "--max-age-cycles", "3")


@pytest.mark.django_db
def test_a_pool_schedulers_probe_counts_only_its_own_pools_cycles(capsys, settings):
    """Shards: pool a's scheduler is dead while pool b's succeeds every cycle. Pool a's probe
    must fail (else its pod is never restarted); pool b's passes; the whole-cluster probe
    (no --pool) counts any cycle."""
    settings.CYCLE_SECONDS = 5
    now = timezone.now()
    old = now - timedelta(minutes=10)
    SchedulingCycle.objects.create(started_at=old, finished_at=old, status="succeeded", pool="a")
    SchedulingCycle.objects.create(started_at=now, finished_at=now, status="succeeded", pool="b")

    with pytest.raises(CommandError) as failed:
        call_command("worker_health", "--pool", "a")
    assert failed.value.returncode == 1 and "pool a" in str(failed.value) and "stale" in str(failed.value)
    call_command("worker_health", "--pool", "b")
    assert "pool b" in capsys.readouterr().out
    call_command("worker_health")

    with pytest.raises(CommandError) as never:
        call_command("worker_health", "--pool", "c")
    assert "no scheduling cycle of pool c has succeeded yet" in str(never.value)
