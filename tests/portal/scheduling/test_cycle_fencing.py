"""A cycle that lost the cycle lock applies and persists nothing (issue 26, "no fencing").

The Redis lock can vanish under a running cycle (Redis restarted, the key expired while the
worker stalled); the next beat tick then starts a second cycle. Each cycle takes a fencing token
from the database when it starts, and the transaction that applies and persists its result first
checks that the token is still the newest: a cycle overtaken by a newer one aborts, so at most one
of two overlapping cycles commits. These run on both databases (the SQLite pass of ``make test``
includes this directory); the Redis-restart test with real workers is
``test_fencing_redis_restart.py``.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

import scheduler
from kai_portal.cluster.backends.simulated import SimulatedBackend
from kai_portal.history.models import Decision, SchedulingCycle, UsageSample
from kai_portal.monitoring.recording import CYCLES
from kai_portal.scheduling import fencing, lock
from kai_portal.workloads.models import Pod
from tests.portal import factories
from tests.portal.monitoring.conftest import parse


class RecordingBackend(SimulatedBackend):
    """The simulated cluster, remembering every apply call it was given."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.applied: list[list[str]] = []

    def apply(self, binds, evictions, events):  # type: ignore[no-untyped-def]
        self.applied.append([b.pod for b in binds])
        return super().apply(binds, evictions, events)


def _between_plan_and_persist(monkeypatch: pytest.MonkeyPatch, meanwhile) -> None:  # type: ignore[no-untyped-def]
    """Run ``meanwhile()`` once, right after the first cycle's engine has planned."""
    real = scheduler.run_cycle
    calls = {"n": 0}

    def planned_then(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 1:
            meanwhile()
        return result

    monkeypatch.setattr(scheduler, "run_cycle", planned_then)


def _redis_restarted() -> None:
    """What a Redis restart (no persistence) does to the lock: the key is gone."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(lock.LOCK_NAME)
    client.close()


@pytest.mark.django_db
def test_a_cycle_overtaken_between_plan_and_persist_applies_and_persists_nothing(
    loop, leaf, monkeypatch, django_user_model, settings
):
    settings.METRICS_PUBLIC = True  # closed without a token in production settings; read here
    factories.node("n1", gpus=1)
    job = factories.job(leaf, "a")
    old_backend, new_backend = RecordingBackend(), RecordingBackend()
    newer: list[SchedulingCycle] = []

    def redis_restarts_and_the_next_tick_runs_a_whole_cycle() -> None:
        _redis_restarted()
        newer.append(loop.run(5, backend=new_backend))

    _between_plan_and_persist(monkeypatch, redis_restarts_and_the_next_tick_runs_a_whole_cycle)
    old = loop.run(backend=old_backend)

    assert newer[0].status == "succeeded", newer[0].error
    assert new_backend.applied == [[job.pods.get().name]]
    # The overtaken cycle planned the same bind; it never reached the cluster or the database.
    assert old_backend.applied == []
    old.refresh_from_db()
    assert old.status == "aborted"
    assert "lost the cycle lock" in old.error
    assert not Decision.objects.filter(cycle=old).exists()
    assert not UsageSample.objects.filter(cycle=old).exists()
    assert Decision.objects.filter(kind="allocated").count() == 1
    assert Pod.objects.get(job=job).state == "bound"
    # The outcome shows where operators look: the cluster page's cycle health and /metrics.
    _, samples = parse(Client().get("/metrics", HTTP_HOST="10.1.2.3:8000").content.decode())
    assert samples[(f"kai_portal_{CYCLES}_total", (("outcome", "aborted"),))] == 1
    assert samples[(f"kai_portal_{CYCLES}_total", (("outcome", "succeeded"),))] == 1
    page = Client()
    page.force_login(django_user_model.objects.create_user("ops"))
    health = page.get(reverse("cluster:overview")).content.decode()
    assert f'#{old.pk} <span class="badge state-aborted">aborted</span>' in health
    assert "<dt>Aborted (last 20)</dt>" in health


@pytest.mark.django_db
def test_a_newer_token_alone_fences_the_older_cycle_even_with_redis_still_granting_its_lock(
    loop, leaf, monkeypatch
):
    """Another cycle took the token while this one still holds its Redis lock (two portals on
    different Redis servers, or the database fallback lock): the token decides."""
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    backend = RecordingBackend()
    _between_plan_and_persist(monkeypatch, lambda: fencing.take_token(lock.LOCK_NAME))

    cycle = loop.run(backend=backend)

    assert cycle.status == "aborted"
    assert "newer cycle" in cycle.error
    assert backend.applied == []
    assert not Decision.objects.exists()
    assert Pod.objects.get().state == "pending"
    assert loop.run(5).status == "succeeded"
    assert Pod.objects.get().state == "bound"


@pytest.mark.django_db
def test_a_cycle_whose_redis_lock_vanished_applies_nothing_even_before_another_cycle_starts(
    loop, leaf, monkeypatch
):
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    backend = RecordingBackend()
    _between_plan_and_persist(monkeypatch, _redis_restarted)

    cycle = loop.run(backend=backend)

    assert cycle.status == "aborted"
    assert "Redis" in cycle.error
    assert backend.applied == []
    assert Pod.objects.get().state == "pending"
    assert loop.run(5).status == "succeeded"


@pytest.mark.django_db
def test_tokens_only_grow_and_only_the_newest_passes_the_check():
    first = fencing.take_token("kai:test-fence")
    second = fencing.take_token("kai:test-fence")
    assert second > first
    assert fencing.take_token("kai:other-fence") >= 1
    with transaction.atomic():
        fencing.check_token("kai:test-fence", second)
    with pytest.raises(fencing.Superseded, match="newer cycle"), transaction.atomic():
        fencing.check_token("kai:test-fence", first)


@pytest.mark.django_db(transaction=True)
def test_a_newer_cycle_cannot_take_a_token_between_the_check_and_the_commit():
    """The check holds the fence row: a newer cycle's token waits for the checked transaction to
    commit, so nothing can overtake a cycle after it has checked and before its writes are in."""
    token = fencing.take_token("kai:test-fence")
    checked, taken = threading.Event(), []

    def newer_cycle() -> None:
        try:
            checked.wait(10)
            taken.append(fencing.take_token("kai:test-fence"))
        finally:
            connection.close()

    thread = threading.Thread(target=newer_cycle)
    thread.start()
    with transaction.atomic():
        fencing.check_token("kai:test-fence", token)
        checked.set()
        time.sleep(1)
        assert taken == []  # still waiting: this transaction holds the row
    thread.join(20)
    assert taken == [token + 1]
    with pytest.raises(fencing.Superseded), transaction.atomic():
        fencing.check_token("kai:test-fence", token)
