"""The capacity planner in Chromium, with a real Celery worker (in this process, on the test Redis):
an admin changes two quotas on a seeded week of history, runs the plan, watches its progress, reads
each team's waits moving as the engine predicts, and downloads the CSV."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import screenshot, sign_in
from tests.portal.planning.seeded_week import seed_week

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(transactional_db: None) -> Iterator[None]:
    """A Celery worker thread consuming the portal's default queue, as `make run`'s worker does."""
    from celery.contrib.testing.worker import start_worker

    from kai_portal.celery import app

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30):
        yield


def test_an_admin_plans_a_quota_change_on_a_week_of_history(
    page: Any, worker: None, django_user_model: Any
) -> None:
    from kai_portal.planning.models import PlanRun

    week = seed_week(timezone.now().replace(second=0, microsecond=0))
    django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    sign_in(page, "root")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Planner").click()
    page.wait_for_url("**/planner/")
    page.fill(f"#id_q{week['alpha'].pk}_gpu_quota", "12")
    page.fill(f"#id_q{week['beta'].pk}_gpu_quota", "4")
    page.get_by_test_id("plan-run").click()
    page.wait_for_url("**/planner/*/")

    # Progress first: the page polls the stored row while the worker replays.
    progress = page.get_by_test_id("plan-progress")
    progress.wait_for()
    seen: set[str] = set()
    deadline = time.monotonic() + 180
    while page.get_by_test_id("plan-teams").count() == 0:
        try:  # one read of the polled box; the page reloads itself once the plan is done
            status = page.evaluate("() => document.querySelector('[data-testid=plan-status]')?.textContent")
        except Exception:  # noqa: BLE001 - the reload destroyed the page's context mid-read
            status = None
        if status:
            seen.add(status)
        if PlanRun.objects.get().status == "failed":
            raise AssertionError(PlanRun.objects.get().error)
        assert time.monotonic() < deadline, f"no results after 180 s; saw {seen}"
        page.wait_for_timeout(200)
    assert seen & {"Queued", "Running"}, seen
    page.get_by_test_id("plan-teams").wait_for(timeout=180_000)
    screenshot(page, "planner-results")

    plan = PlanRun.objects.get()
    out = plan.outputs
    for team, row in (("Alpha", "alpha"), ("Beta", "beta")):
        today = round(out["today"]["teams"][team]["median_wait_s"] / 60, 1)
        changed = round(out["changed"]["teams"][team]["median_wait_s"] / 60, 1)
        cell = page.locator(f'tr[data-team="{team}"] [data-testid="team-median"]').inner_text()
        assert cell == f"{today:g} → {changed:g}" or cell == f"{today} → {changed}", (cell, today, changed)
        assert out["changed"]["queues"][row]["team"] == team
    # The engine's direction: alpha's quota went up, beta's down.
    assert out["changed"]["teams"]["Alpha"]["median_wait_s"] < out["today"]["teams"]["Alpha"]["median_wait_s"]
    assert out["changed"]["teams"]["Beta"]["median_wait_s"] > out["today"]["teams"]["Beta"]["median_wait_s"]
    assert page.locator("svg.plan-chart").count() == 3

    with page.expect_download() as download:
        page.get_by_test_id("plan-csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    teams = {(r["name"], r["setting"]): r for r in rows if r["level"] == "team"}
    assert float(teams[("Alpha", "changed")]["median_wait_min"]) == round(
        out["changed"]["teams"]["Alpha"]["median_wait_s"] / 60, 1
    )
    assert {r["setting"] for r in rows} == {"today", "changed"}
    assert download.value.suggested_filename == f"capacity-plan-{plan.pk}.csv"
