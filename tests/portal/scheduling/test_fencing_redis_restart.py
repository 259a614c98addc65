"""Issue 26's done-when: Redis restarted mid-cycle under two worker processes, at most one commits.

As the issue's probe did it: a Celery worker at ``--concurrency 2`` (docker-compose's setting) on
its own Redis server (broker and cycle lock), the PostgreSQL test database, and a cycle slowed down
between planning and persisting (``KAI_TEST_CYCLE_PAUSE_SECONDS``, read by ``settings_test`` only)
so Redis can be restarted while it runs. The restart loses the lock (no persistence, as in the
compose file), the next tick's cycle takes it and plans the same pod; before fencing both cycles
committed ``succeeded``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import connection

from kai_portal.history.models import Decision, SchedulingCycle, UsageSample
from kai_portal.workloads.models import Pod
from tests.portal import factories

ROOT = Path(__file__).resolve().parents[3]
PAUSE_SECONDS = 12  # the cycle's sleep between plan and persist: room to restart Redis and start another
REDIS_SERVER = shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A redis-server of this test's own on a free loopback port, without persistence."""

    def __init__(self, workdir: Path) -> None:
        self.port, self.workdir = _free_port(), workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_until(self._answers, "the private redis-server to answer", 10)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def _answers(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        try:
            return bool(client.ping())
        except redis.exceptions.ConnectionError:
            return False
        finally:
            client.close()


def _wait_until(condition: Callable[[], bool], what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    with tempfile.TemporaryDirectory() as workdir:
        server = PrivateRedis(Path(workdir))
        server.start()
        yield server
        server.stop()


def _worker_env(redis_url: str) -> dict[str, str]:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kai_portal.settings_test",
        # The worker must see the test database pytest-django created, and only this test's Redis.
        "TEST_DATABASE_URL": f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "TEST_REDIS_URL": redis_url,
        "KAI_TEST_CYCLE_PAUSE_SECONDS": str(PAUSE_SECONDS),
        "FORECAST_AFTER_CYCLE": "0",
    }


def _tick(redis_url: str) -> None:
    """What beat sends every CYCLE_SECONDS: one run_cycle task on the scheduling queue."""
    sender = Celery("fencing-test", broker=redis_url)
    try:
        sender.send_task("kai_portal.scheduling.tasks.run_cycle", queue="scheduling")
    finally:
        sender.close()


@pytest.mark.skipif(REDIS_SERVER is None, reason="needs redis-server on PATH")
@pytest.mark.postgres_only("the Celery worker is the production path, which runs on PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_redis_restarted_mid_cycle_under_two_worker_processes_lets_at_most_one_cycle_commit(
    leaf, private_redis
):
    factories.node("n1", gpus=1)
    job = factories.job(leaf, "a")
    log = tempfile.NamedTemporaryFile(prefix="fencing-worker-", suffix=".log", delete=False)  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "kai_portal", "worker", "--concurrency", "2",
         "-Q", "scheduling,default", "--without-heartbeat", "--without-gossip", "--without-mingle",
         "-l", "info"],
        cwd=ROOT, env=_worker_env(private_redis.url), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        _tick(private_redis.url)
        running = SchedulingCycle.objects.filter(status="running")
        _wait_until(running.exists, "the first cycle to start", 90)
        first = running.get()
        time.sleep(1)  # planned (one pod, one node: milliseconds) and now pausing before it persists

        private_redis.stop()  # Redis restarts mid-cycle: its keys, the cycle lock among them, are gone
        private_redis.start()
        _tick(private_redis.url)  # the next beat tick, while the first cycle still runs

        ran = SchedulingCycle.objects.exclude(status="skipped")
        _wait_until(lambda: ran.count() >= 2, "the second cycle to start", 60)
        ended = ran.filter(status__in=["succeeded", "aborted"])
        _wait_until(lambda: ended.count() >= 2, "both cycles to end", 3 * PAUSE_SECONDS + 30)
        connection.close()
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()
        output = Path(log.name).read_text(errors="replace")
        os.unlink(log.name)

    cycles = list(ran.order_by("pk"))
    assert len(cycles) == 2, output[-4000:]
    older, newer = cycles
    assert older.pk == first.pk
    committed = [c for c in cycles if c.status == "succeeded"]
    assert committed == [newer], [(c.pk, c.status, c.error[-300:]) for c in cycles]
    # The overtaken cycle says why, and wrote nothing: no decisions, no usage, no counts.
    assert older.status == "aborted"
    assert "lost the cycle lock" in older.error
    assert not Decision.objects.filter(cycle=older).exists()
    assert not UsageSample.objects.filter(cycle=older).exists()
    assert older.allocated_count == 0
    # The newer cycle bound the pod, once.
    assert newer.allocated_count == 1
    assert Decision.objects.filter(kind="allocated").count() == 1
    assert Pod.objects.get(job=job).state == "bound"
    assert "cycle lock lost" in output  # the heartbeat saw the restart, as in the trial
