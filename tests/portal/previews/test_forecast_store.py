"""The stored forecast: the scheduling worker computes it after a cycle, requests only read it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from kai_portal.history.models import JobForecast
from kai_portal.previews import forecast, forecast_store
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.teams.models import Membership
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(loop: Any, department: Any, django_user_model: Any) -> dict[str, Any]:
    factories.node("n1", gpus=2)
    alpha = factories.team("alpha")
    alice = django_user_model.objects.create_user("alice", password="pw")
    Membership(team=alpha, user=alice).save()
    qa = factories.queue("qa", parent=department, team=alpha, gpu_quota=2)
    running = factories.job(qa, "running", gpu_count=2, duration=timedelta(seconds=300))
    loop.run()
    loop.run(5)
    first = factories.job(qa, "first", gpu_count=2, duration=timedelta(seconds=60))
    second = factories.job(qa, "second", gpu_count=1, duration=timedelta(seconds=60))
    return {"alice": alice, "queue": qa, "running": running, "first": first, "second": second}


def _forbid_forecast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way into the forecast computation raises: a request that reaches one fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the forecast was computed inside a request")

    for name in ("forecast", "estimate", "positions", "pool_orders", "simulate"):
        monkeypatch.setattr(forecast, name, refuse)
    monkeypatch.setattr(forecast_store, "refresh", refuse)
    monkeypatch.setattr(forecast_store, "estimate", refuse)
    monkeypatch.setattr(forecast_store, "positions", refuse)


def test_stored_values_appear_after_a_cycle(world: dict[str, Any], loop: Any) -> None:
    first, second = world["first"], world["second"]
    assert not JobForecast.objects.filter(job__in=[first, second]).exists()  # submitted after the cycle
    loop.run(1)
    rows = {row.job_id: row for row in JobForecast.objects.all()}
    assert set(rows) == {first.pk, second.pk}
    assert (rows[first.pk].queue_position, rows[first.pk].cluster_position) == (1, 1)
    assert (rows[second.pk].queue_position, rows[second.pk].cluster_pending) == (2, 2)
    assert rows[first.pk].computed_at == loop.now and rows[first.pk].estimated_at == loop.now
    # The running job's declared 300 s end at started + 300 s; first starts then.
    started = world["running"].pods.get().started_at
    assert rows[first.pk].estimated_start == started + timedelta(seconds=300)
    # The same numbers as the full (unbudgeted) forecast.
    full = forecast.forecast(loop.now)
    assert full[first.pk].estimated_start == rows[first.pk].estimated_start
    assert full[second.pk].estimated_start == rows[second.pk].estimated_start


def test_requests_never_run_the_forecast(
    world: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop.run(1)
    _forbid_forecast(monkeypatch)
    first = world["first"]
    stored = JobForecast.objects.get(job=first)

    api = APIClient()
    api.force_authenticate(world["alice"])
    listing = api.get("/api/v1/jobs/?state=pending").json()
    by_name = {row["name"]: row for row in listing["results"]}
    assert by_name["first"]["forecast"]["cluster_position"] == 1
    assert by_name["first"]["forecast"]["estimated_start"] is not None
    assert by_name["second"]["forecast"]["queue_position"] == 2
    body = api.get(f"/api/v1/jobs/{first.uid}/forecast/").json()
    assert body["jobs_ahead"] == 0 and body["estimated_at"] is not None
    second = api.get(f"/api/v1/jobs/{world['second'].uid}/forecast/").json()
    assert second["jobs_ahead"] == 1 and [j["name"] for j in second["ahead_visible"]] == ["first"]
    assert api.get(f"/api/v1/jobs/{first.uid}/").json()["forecast"]["cluster_pending"] == 2

    client = Client()
    client.force_login(world["alice"])
    page = client.get("/jobs/").content.decode()
    assert 'data-testid="est-start"' in page and "not yet" not in page
    job_page = client.get(f"/jobs/{first.uid}/").content.decode()
    assert stored.estimated_start is not None
    expected = timezone.localtime(stored.estimated_start).strftime("%Y-%m-%d %H:%M:%S")
    assert expected in job_page


def test_a_job_submitted_after_the_cycle_is_not_yet_estimated(world: dict[str, Any], loop: Any) -> None:
    loop.run(1)
    late = factories.job(world["queue"], "late", gpu_count=1)
    client = Client()
    client.force_login(world["alice"])
    page = client.get(f"/jobs/{late.uid}/").content.decode()
    assert "Not estimated yet: the next scheduling cycle has not looked at it yet." in page
    api = APIClient()
    api.force_authenticate(world["alice"])
    assert api.get(f"/api/v1/jobs/{late.uid}/forecast/").json()["unknown"] == "not_yet_considered"


def test_pages_say_how_old_the_estimate_is(world: dict[str, Any], loop: Any) -> None:
    loop.run(1)
    first, second = world["first"], world["second"]
    now = timezone.now()
    JobForecast.objects.filter(job=first).update(
        estimated_at=now - timedelta(minutes=3), estimated_start=now + timedelta(hours=2)
    )
    JobForecast.objects.filter(job=second).update(estimated_at=None, estimated_start=None)
    client = Client()
    client.force_login(world["alice"])
    page = client.get(f"/jobs/{first.uid}/").content.decode()
    assert 'data-testid="estimate-age">3 min ago' in page
    listing = client.get("/jobs/").content.decode()
    assert 'data-testid="est-age">3 min ago</small>' in listing
    assert "not yet estimated" in listing
    assert "not yet estimated" in client.get(f"/jobs/{second.uid}/").content.decode()


def _fake_clock(monkeypatch: pytest.MonkeyPatch, values: list[float] | None = None) -> list[float]:
    """``time.monotonic`` in the forecast modules: ``values`` in turn, then one second more per call
    (from 1000 without values); returns the log of the readings."""
    calls: list[float] = []
    queue = list(values or [])

    def monotonic() -> float:
        calls.append(queue.pop(0) if queue else (calls[-1] + 1 if calls else 1000.0))
        return calls[-1]

    clock = SimpleNamespace(monotonic=monotonic, perf_counter=monotonic)
    monkeypatch.setattr(forecast, "time", clock)
    monkeypatch.setattr(forecast_store, "time", clock)
    return calls


def test_the_budget_stops_the_simulation_and_keeps_older_estimates(
    world: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop.run(1)
    first = world["first"]
    old = JobForecast.objects.get(job=first)
    assert old.estimated_at == loop.now and old.estimated_start is not None
    calls = _fake_clock(monkeypatch)
    loop.now += timedelta(seconds=1)
    report = forecast_store.refresh(loop.now, budget_s=2)
    # Readings: the refresh starts at 1000 (deadline 1002); the estimate at 1001, so the simulation
    # may run until 1001.75; before its second cycle it reads 1002 and stops (nothing could start in
    # the first: the running job holds the GPUs); the fit checks read 1003, past the deadline, and
    # do nothing; the last reading times the refresh.
    assert calls == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0] and report.seconds == 4.0
    assert report.pending == 2 and report.estimated == 0 and report.kept == 2
    row = JobForecast.objects.get(job=first)
    assert row.computed_at == loop.now  # positions are fresh every time
    assert (row.estimated_at, row.estimated_start) == (old.estimated_at, old.estimated_start)


def test_a_job_the_budget_did_not_reach_gets_a_lower_bound(
    world: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop.run(1)
    first, second = world["first"], world["second"]
    inp = build_snapshot(loop.now)
    data = forecast.ForecastInputs.load(inp)
    fcs = forecast.positions(inp, data, loop.now)
    # Deadline 1010: the simulation may run until 1007.5 and reads 1008 before its second cycle (stops);
    # every job it did not reach gets a lower bound; one fit check reads 1009 (in time), the next 1010
    # (too late).
    _fake_clock(monkeypatch, [1000.0, 1008.0, 1009.0, 1010.0])
    decided = forecast.estimate(inp, data, loop.now, fcs, deadline=1010, stalest_first=[second.pk, first.pk])
    assert decided == {first.pk, second.pk}
    assert fcs[second.pk].fit_checked_at == loop.now and fcs[first.pk].fit_checked_at is None
    assert fcs[first.pk].unknown == forecast.UNKNOWN_NOT_BEFORE
    bound = fcs[second.pk]
    assert bound.unknown == forecast.UNKNOWN_NOT_BEFORE and bound.estimated_start is None
    # Only the first simulated cycle (now) ran: that is all the bound can say.
    assert bound.not_before == loop.now
    assert bound.reason == (
        "within its time budget the simulation got less than a minute ahead and had not started it by then"
    )

    # Stored: with no older estimate the bound is shown; an older estimate past the bound is kept.
    JobForecast.objects.filter(job=second).update(estimated_at=None, estimated_start=None)
    later = loop.now + timedelta(hours=5)
    JobForecast.objects.filter(job=first).update(estimated_start=later)
    # Refresh at 1000 (deadline 1010.5), estimate at 1001 (simulation until 1008.125), the simulation
    # stops at 1009, one fit check at 1010 (the never-estimated job first), none at 1011.
    _fake_clock(monkeypatch, [1000.0, 1001.0, 1009.0, 1010.0, 1011.0])
    report = forecast_store.refresh(loop.now, budget_s=10.5)
    assert report.estimated == 1 and report.kept == 1
    client = Client()
    client.force_login(world["alice"])
    page = client.get(f"/jobs/{second.uid}/").content.decode()
    assert "not before" in page and "within its time budget the simulation got" in page
    assert JobForecast.objects.get(job=first).estimated_start == later


def test_never_fitting_jobs_are_checked_stalest_first_within_the_budget(
    world: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gang of 3 one-GPU pods on a 2-GPU cluster: each pod fits a node, the gang never starts.
    big = [factories.job(world["queue"], f"big-{i}", task_count=3, min_member=3) for i in range(3)]
    loop.run(1)
    assert all(JobForecast.objects.get(job=j).unknown == forecast.UNKNOWN_NEVER_FITS for j in big)
    inp = build_snapshot(loop.now)
    data = forecast.ForecastInputs.load(inp)
    fcs = forecast.positions(inp, data, loop.now)
    # The clock stands still until the first fit check, then jumps past the deadline.
    checked: list[str] = []
    never_fits = forecast.never_fits_reason

    def recording(inp: Any, job: Any) -> str | None:
        checked.append(job.name)
        return never_fits(inp, job)

    monkeypatch.setattr(forecast, "never_fits_reason", recording)
    clock = SimpleNamespace(monotonic=lambda: 2000.0 if checked else 1000.0)
    monkeypatch.setattr(forecast, "time", clock)
    order = [big[2].pk, big[0].pk, big[1].pk]
    decided = forecast.estimate(inp, data, loop.now, fcs, deadline=1500, stalest_first=order)
    assert checked == ["big-2"]
    assert big[2].pk in decided and big[0].pk not in decided and big[1].pk not in decided
    assert fcs[big[2].pk].unknown == forecast.UNKNOWN_NEVER_FITS
    assert fcs[big[0].pk].estimated_at is None  # left for a later refresh


def test_the_worker_hook_never_fails_a_cycle(
    world: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("forecast bug")

    monkeypatch.setattr(forecast_store, "refresh", broken)
    cycle = loop.run(1)
    assert cycle.status == "succeeded"


UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"  # nothing listens there


def _cache_at_unreachable_redis(settings: Any, backend: str) -> None:
    # Django's setting_changed handler rebuilds the cache connections from this.
    settings.CACHES = {"default": {"BACKEND": backend, "LOCATION": UNREACHABLE_REDIS}}


@pytest.fixture
def redis_down(settings: Any) -> Iterator[None]:
    # A plain Redis cache first: any read of the cache fails loudly.
    _cache_at_unreachable_redis(settings, "django.core.cache.backends.redis.RedisCache")
    yield


def test_with_redis_down_the_job_list_and_submit_still_work(
    world: dict[str, Any], loop: Any, redis_down: None, settings: Any
) -> None:
    import redis
    from django.core.cache import cache

    loop.run(1)
    with pytest.raises(redis.ConnectionError):
        cache.get("anything")  # Redis really is unreachable here
    api = APIClient()
    api.force_authenticate(world["alice"])
    # Reads (the list with its stored forecasts) never touch the cache: the plain cache would raise.
    listing = api.get("/api/v1/jobs/")
    assert listing.status_code == 200 and listing.json()["count"] == 3
    # A write is counted against the user's write rate in the cache (core/write_throttle.py): with
    # the deployment's own backend, still unreachable, the count is skipped and the write goes on.
    _cache_at_unreachable_redis(settings, "kai_portal.core.cache.DegradingRedisCache")
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(UNREACHABLE_REDIS).ping()
    created = api.post("/api/v1/jobs/", {"name": "while-redis-down", "queue": "qa", "gpu_count": 1},
                       format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    assert created.json()["forecast"]["unknown"] == "not_yet_considered"
    client = Client()
    client.force_login(world["alice"])
    assert "while-redis-down" in client.get("/jobs/").content.decode()


def test_fit_checks_rotate_stalest_first_across_refreshes(
    world: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop.run(1)
    first, second = world["first"], world["second"]
    JobForecast.objects.update(fit_checked_at=None)
    checked = []
    for _ in range(2):
        loop.now += timedelta(seconds=5)
        # Budget 10.5 from 1000; the simulation stops at 1009 (its share ends at 1008.125); one fit
        # check at 1010; none at 1011.
        _fake_clock(monkeypatch, [1000.0, 1001.0, 1009.0, 1010.0, 1011.0])
        forecast_store.refresh(loop.now, budget_s=10.5)
        rows = {row.job_id: row.fit_checked_at for row in JobForecast.objects.all()}
        checked.append({pk for pk, at in rows.items() if at == loop.now})
    assert len(checked[0]) == 1 and len(checked[1]) == 1
    assert checked[0] | checked[1] == {first.pk, second.pk}  # the second refresh took the other job
