"""End to end through Celery: a real worker on the real Redis broker runs the cycle task."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from kai_portal.celery import app
from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling.tasks import run_cycle
from kai_portal.workloads.models import Pod
from tests.portal import factories

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.postgres_only("the Celery worker and beat are the production path, which runs on PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_cycle_task_from_the_scheduling_queue(leaf):
    factories.node("n1", gpus=1)
    job = factories.job(leaf, "a")
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kai_portal.settings_test",
        # The worker must see the test database pytest-django created.
        "TEST_DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "TEST_REDIS_URL": settings.CELERY_BROKER_URL,
    }
    if db.get("PASSWORD"):
        env["TEST_DATABASE_URL"] = env["TEST_DATABASE_URL"].replace(
            f"{db['USER']}@", f"{db['USER']}:{db['PASSWORD']}@"
        )
    with app.connection_for_write() as conn:
        for queue in ("scheduling", "default"):
            conn.default_channel.queue_purge(queue)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "kai_portal", "worker", "--pool=solo",
         "-Q", "scheduling,default", "--without-heartbeat", "--without-gossip", "--without-mingle",
         "-l", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        run_cycle.apply_async()  # routed to the scheduling queue by CELERY_TASK_ROUTES
        deadline = time.monotonic() + 60
        finished = SchedulingCycle.objects.exclude(status="running")
        while time.monotonic() < deadline and not finished.exists():
            time.sleep(0.2)
        connection.close()
        cycle = SchedulingCycle.objects.get()
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=30)
    assert cycle.status == "succeeded", output.decode()
    assert cycle.allocated_count == 1
    assert Pod.objects.get(job=job).state == "bound"
