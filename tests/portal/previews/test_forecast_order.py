"""Estimates that explain themselves: within one queue a job is never shown starting before a job
ahead of it that it must wait behind (one asking no more than it does), and where it may start
before a job ahead (that one asks for more), the page says why.

The contradiction of issue 31 ("the 150th says not before 23:32, the 1st says 23:45"): a budgeted
refresh keeps an older estimate for a job ahead (later than the new lower bound) while a job
behind it gets only the new, earlier lower bound."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from kai_portal.history.models import JobForecast
from kai_portal.previews import forecast_store
from kai_portal.teams.models import Membership
from tests.portal import factories
from tests.portal.previews.test_forecast_store import _fake_clock

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(loop: Any, department: Any, django_user_model: Any) -> dict[str, Any]:
    factories.node("n1", gpus=2)
    alpha = factories.team("alpha")
    alice = django_user_model.objects.create_user("alice", password="pw")
    Membership(team=alpha, user=alice).save()
    qa = factories.queue("qa", parent=department, team=alpha, gpu_quota=2)
    factories.job(qa, "running", gpu_count=2, duration=timedelta(seconds=300))
    loop.run()
    loop.run(5)
    return {"alice": alice, "queue": qa}


def _budgeted_refresh_keeping(loop: Any, monkeypatch: pytest.MonkeyPatch, first: Any, later: Any) -> None:
    """A cycle's estimates, then an older estimate ``later`` for ``first`` and a budgeted refresh
    that reaches no job (as on a busy cluster): ``first`` keeps ``later``, the rest get a bound."""
    loop.run(1)
    JobForecast.objects.filter(job=first).update(estimated_start=later)
    JobForecast.objects.exclude(job=first).update(estimated_at=None, estimated_start=None)
    _fake_clock(monkeypatch, [1000.0, 1001.0, 1009.0, 1010.0, 1011.0, 1012.0, 1013.0])
    forecast_store.refresh(loop.now, budget_s=10.5)


def test_a_job_behind_an_alike_job_is_never_shown_starting_before_it(
    queue: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = factories.job(queue["queue"], "first", gpu_count=1, duration=timedelta(seconds=60))
    second = factories.job(queue["queue"], "second", gpu_count=1, duration=timedelta(seconds=60))
    later = loop.now + timedelta(hours=5)
    _budgeted_refresh_keeping(loop, monkeypatch, first, later)
    rows = {r.job_id: r for r in JobForecast.objects.all()}
    assert rows[first.pk].estimated_start == later
    behind = rows[second.pk]
    assert behind.estimated_start is None and behind.not_before is not None
    assert behind.not_before >= later, "a job that must wait behind first is said to start before it"
    assert "waits behind first" in behind.reason
    client = Client()
    client.force_login(queue["alice"])
    page = client.get(f"/jobs/{second.uid}/").content.decode()
    assert f"not before {later:%Y-%m-%d %H:%M:%S}" in page and "waits behind first" in page


def test_a_smaller_job_that_may_start_earlier_says_why(
    queue: dict[str, Any], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = factories.job(queue["queue"], "first", gpu_count=2, duration=timedelta(seconds=60))
    second = factories.job(queue["queue"], "second", gpu_count=1, duration=timedelta(seconds=60))
    later = loop.now + timedelta(hours=5)
    _budgeted_refresh_keeping(loop, monkeypatch, first, later)
    behind = JobForecast.objects.get(job=second)
    assert behind.not_before is not None and behind.not_before < later
    assert "may start before first, ahead of it in its queue, which asks for more" in behind.reason


def test_jobs_ahead_is_a_count_with_the_first_few_and_a_link(queue: dict[str, Any], loop: Any) -> None:
    jobs = [
        factories.job(queue["queue"], f"j{i:02d}", gpu_count=1, duration=timedelta(seconds=60))
        for i in range(12)
    ]
    loop.run(1)
    client = Client()
    client.force_login(queue["alice"])
    page = client.get(f"/jobs/{jobs[-1].uid}/").content.decode()
    ahead = page[page.index('data-testid="jobs-ahead"') :].split("</dd>")[0]
    assert "11 jobs" in ahead
    shown = [j.name for j in jobs[:-1] if f">{j.name}</a>" in ahead]
    assert shown == ["j00", "j01", "j02", "j03", "j04"]
    assert "/jobs/?queue=qa&amp;state=pending" in ahead
