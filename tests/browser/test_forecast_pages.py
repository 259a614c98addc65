"""Browser: queue position and estimated start on the job page; a starved queue in the fairness audit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from kai_portal.history.models import UsageSample
from tests.browser.conftest import run_cycle, screenshot, sign_in
from tests.portal import factories

pytestmark = pytest.mark.django_db(transaction=True)


def test_job_page_shows_queue_position_and_estimated_start(page: Any, django_user_model: Any) -> None:
    cache.clear()
    django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    factories.node("n1", gpus=2)
    dept = factories.queue("dept", gpu_quota=4)
    leaf = factories.queue("leaf", parent=dept, gpu_quota=2)
    running = factories.job(leaf, "running", gpu_count=2, duration=timedelta(hours=1))
    now = timezone.now()
    run_cycle(now)
    run_cycle(now + timedelta(seconds=1))
    waiting = factories.job(leaf, "waiting", gpu_count=2, duration=timedelta(minutes=10))
    run_cycle(now + timedelta(seconds=2))

    sign_in(page, "root")
    page.goto(f"/jobs/{waiting.uid}/")
    card = page.locator("[data-testid=job-forecast]")
    card.wait_for()
    assert page.locator("[data-testid=queue-position]").inner_text().startswith("1 of 1")
    # The waiting job starts when the running one ends: its start plus its declared hour.
    started = running.pods.get().started_at
    expected = timezone.localtime(started + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert page.locator("[data-testid=estimated-start]").inner_text().startswith(expected)
    screenshot(page, "forecast_job_page")
    page.goto("/jobs/")
    assert page.locator("tr[data-job=waiting] [data-testid=est-start]").inner_text().startswith("in ")
    screenshot(page, "forecast_job_list")


def test_fairness_audit_page_shows_a_starved_queue(page: Any, django_user_model: Any) -> None:
    django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    factories.node("n1", gpus=8)
    dept = factories.queue("dept", gpu_quota=8)
    starved = factories.queue("team-x", parent=dept, gpu_quota=4)
    now = timezone.now()
    UsageSample.objects.bulk_create(
        UsageSample(
            queue=starved,
            resource="gpu",
            sampled_at=now - timedelta(minutes=m),
            allocated=1,
            requested=6,
            deserved=4,
            fair_share=4,
        )  # fmt: skip
        for m in range(0, 61, 5)
    )
    sign_in(page, "root")
    page.goto("/fairness/")
    row = page.locator("[data-testid=fairness-findings] tr[data-kind=starved][data-queue=team-x]")
    row.wait_for()
    assert "3 GPUs short" in row.inner_text()
    screenshot(page, "fairness_audit")
