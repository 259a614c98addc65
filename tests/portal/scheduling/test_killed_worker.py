"""A worker killed mid-cycle stalls scheduling for at most one short lock expiry, and its
cycle row does not stay ``running`` (issue 14).

The worker is a real process (a child Python running one cycle on the test database),
slowed down inside its cycle and killed with SIGKILL, so nothing in it gets to clean up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling.cycle import ABANDONED, run_scheduling_cycle
from kai_portal.workloads.models import Job
from tests.portal import factories

WORKER = textwrap.dedent(
    """
    import time
    from pathlib import Path

    import django

    django.setup()
    from kai_portal.cluster.backends.simulated import SimulatedBackend
    from kai_portal.scheduling.cycle import run_scheduling_cycle

    class Stuck(SimulatedBackend):
        def observe(self):
            Path({marker!r}).write_text("in the cycle")
            time.sleep(300)
            return super().observe()

    run_scheduling_cycle(backend=Stuck())
    """
)


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.mark.postgres_only("the killed worker is the production path: PostgreSQL and the Redis cycle lock")
@pytest.mark.django_db(transaction=True)
def test_after_a_sigkill_mid_cycle_the_next_cycle_runs_within_15_s(leaf, tmp_path: Path) -> None:
    factories.node("n1", gpus=1)
    job = factories.job(leaf, "waiting")
    marker = tmp_path / "marker"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kai_portal.settings_test",
           "TEST_DATABASE_URL": _database_url(), "TEST_REDIS_URL": settings.REDIS_URL}  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER.format(marker=str(marker))], env=env, cwd=settings.BASE_DIR
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert worker.poll() is None, "the worker exited before reaching its cycle"
            assert time.monotonic() < deadline, "the worker never reached its cycle"
            time.sleep(0.1)
        time.sleep(11)  # past the 10 s expiry: only the heartbeat keeps the lock alive
        assert run_scheduling_cycle().status == "skipped"  # the live worker holds the lock
        os.kill(worker.pid, signal.SIGKILL)
        killed = time.monotonic()
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()

    while True:
        cycle = run_scheduling_cycle()
        if cycle.status != "skipped":
            break
        assert time.monotonic() - killed < 15, "no cycle ran within 15 s of the kill"
        time.sleep(0.5)
    waited = time.monotonic() - killed

    assert cycle.status == "succeeded" and waited < 15, (cycle.status, waited)
    assert not SchedulingCycle.objects.filter(status="running").exists()
    abandoned = SchedulingCycle.objects.filter(error=ABANDONED)
    assert abandoned.count() == 1 and abandoned.get().status == "failed"
    assert Job.objects.get(pk=job.pk).pods.get().state == "bound"
    assert cycle.finished_at > cycle.started_at
