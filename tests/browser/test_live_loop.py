"""Journeys with the scheduling loop running, as under ``make run`` (SQLite in its run of ``make test``).

The loop cycles in a background thread on the wall clock while the browser works; nothing
here calls a cycle by hand, so every value the pages show came from the live loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from kai_portal.teams.models import Membership
from tests.browser.conftest import LiveLoop, screenshot, sign_in
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _eventually(page: Any, check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Reload until ``check()`` holds: the page shows what the loop wrote since the last load."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {timeout} s")
        time.sleep(0.3)
        page.reload()


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    """One 8-GPU node; department 'research' (8 GPUs) split between teams alpha and beta."""
    factories.node("gpu-node-1", pool="default", gpus=8)
    alpha, beta = factories.team("alpha", name="Alpha"), factories.team("beta", name="Beta")
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    alice = django_user_model.objects.create_user("alice", password="pw")
    Membership(team=alpha, user=alice).save()
    research = factories.queue("research", gpu_quota=8)
    alpha_q = factories.queue("alpha-train", parent=research, team=alpha, gpu_quota=2)
    beta_q = factories.queue("beta-train", parent=research, team=beta, gpu_quota=2)
    return {"root": root, "alice": alice, "alpha": alpha_q, "beta": beta_q}


def test_admin_edits_quota_and_weight_with_the_loop_running(
    page: Any, world: dict[str, Any], live_loop: LiveLoop
) -> None:
    # Both teams want the whole cluster: 8 one-GPU tasks each.
    factories.job(world["alpha"], "alpha-sweep", task_count=8, min_member=0)
    factories.job(world["beta"], "beta-sweep", task_count=8, min_member=0)
    live_loop.wait_cycles(1)
    sign_in(page, "root")
    page.goto("/queues/alpha-train/")
    fair_share = page.locator("[data-testid=fair-share-gpu]")
    # Quotas 2 + 2; the other 4 GPUs split by equal weights.
    _eventually(page, lambda: fair_share.inner_text() == "4", "alpha's fair share 4 before the edit")
    assert page.locator("[data-testid=weight-gpu]").inner_text() == "1"

    page.click("text=Edit quotas")
    page.wait_for_url("**/queues/alpha-train/edit/")
    page.fill("#id_gpu_quota", "3")
    page.fill("#id_gpu_over_quota_weight", "2")
    page.click("button:has-text('Save changes')")
    page.wait_for_url("**/queues/alpha-train/")  # the page that was an HTTP 500 under make run
    assert "Fair shares change from the next scheduling cycle" in page.inner_text(".messages")
    assert page.locator("[data-testid=quota-gpu]").inner_text() == "3"
    assert page.locator("[data-testid=weight-gpu]").inner_text() == "2"

    # After the loop's next cycles: quota 3 + the 3 GPUs left split 2:1 = 5; beta 2 + 1 = 3.
    _eventually(page, lambda: fair_share.inner_text() == "5", "alpha's fair share 5 after the edit")
    page.goto("/queues/")
    assert page.locator('tr[data-queue="beta-train"] [data-testid="fair-share"]').inner_text() == "3"
    screenshot(page, "live-loop-quota-fair-share")

    page.goto("/audit/?model=queue")
    audit = page.inner_text("[data-testid=audit-table]")
    assert "alpha-train" in audit and "gpu_quota" in audit and "gpu_over_quota_weight" in audit
    assert "root" in audit


def test_member_sees_position_and_estimated_start_from_the_worker(
    page: Any, world: dict[str, Any], live_loop: LiveLoop
) -> None:
    alpha = world["alpha"]
    blocker = factories.job(alpha, "blocker", gpu_count=8, duration=timedelta(hours=1))
    waiting = factories.job(alpha, "waiting", gpu_count=8, duration=timedelta(minutes=10))
    sign_in(page, "alice")
    page.goto(f"/jobs/{waiting.uid}/")
    position = page.locator("[data-testid=queue-position]")
    _eventually(page, lambda: position.count() == 1 and position.inner_text().startswith("1 of"),
                "the waiting job's queue position")  # fmt: skip
    estimate = page.locator("[data-testid=estimated-start]")
    running = blocker.pods.filter(state="running")
    _eventually(page, running.exists, "the blocker running")
    # The blocker's declared hour from its start (the job page shows the absolute time). An estimate
    # made while the blocker was only bound counts its hour from that cycle; the next refresh fixes it.
    expected = timezone.localtime(running.get().started_at + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    _eventually(page, lambda: estimate.inner_text().startswith(expected),
                f"the estimated start {expected}")  # fmt: skip
    assert "(in 59" in estimate.inner_text() or "(in 1" in estimate.inner_text()
    assert page.locator("[data-testid=estimate-age]").inner_text().startswith("just now")
    page.goto("/jobs/?state=pending")
    row = page.locator("tr[data-job=waiting]")
    assert row.locator("[data-testid=position]").inner_text().startswith("1 /")
    assert row.locator("[data-testid=est-start]").inner_text().startswith("in ")
    screenshot(page, "live-loop-forecast")
