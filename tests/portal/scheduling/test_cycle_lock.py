"""Two cycles never run at once: the Redis lock, and its database fallback."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from django.conf import settings
from django.db import connection

from kai_portal.cluster.backends.simulated import SimulatedBackend
from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling import lock
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.workloads.models import Job
from tests.portal import factories


@pytest.mark.django_db
def test_a_cycle_skips_when_another_process_holds_the_lock(loop, leaf):
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    other = redis.Redis.from_url(settings.REDIS_URL)
    held = other.lock(lock.LOCK_NAME, timeout=30)
    assert held.acquire(blocking=False)
    try:
        cycle = loop.run()
    finally:
        held.release()
        other.close()

    assert cycle.status == "skipped"
    assert SchedulingCycle.objects.filter(status="skipped").count() == 1
    assert Job.objects.get().pods.get().state == "pending"
    assert loop.run(5).status == "succeeded"


class SlowBackend(SimulatedBackend):
    running = 0
    most = 0
    guard = threading.Lock()

    def observe(self):
        with self.guard:
            SlowBackend.running += 1
            SlowBackend.most = max(SlowBackend.most, SlowBackend.running)
        time.sleep(0.5)
        try:
            return super().observe()
        finally:
            with self.guard:
                SlowBackend.running -= 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_cycles_never_both_run(leaf):
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    statuses: list[str] = []
    start = threading.Barrier(2)

    def cycle() -> None:
        start.wait()
        try:
            statuses.append(run_scheduling_cycle(backend=SlowBackend()).status)
        finally:
            connection.close()

    threads = [threading.Thread(target=cycle) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(statuses) == ["skipped", "succeeded"]
    assert SlowBackend.most == 1


@pytest.mark.django_db(transaction=True)
def test_without_redis_the_lock_falls_back_to_a_database_advisory_lock(leaf):
    unreachable = "redis://127.0.0.1:1/0"
    with lock.cycle_lock(unreachable) as first:
        assert first
        results: list[bool] = []

        def other() -> None:
            try:
                with lock.cycle_lock(unreachable) as second:
                    results.append(bool(second))
            finally:
                connection.close()

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert results == [False]
    with lock.cycle_lock(unreachable) as again:
        assert again
