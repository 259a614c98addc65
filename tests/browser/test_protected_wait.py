"""A job blocked by a protected job, with the scheduling loop running (as test_live_loop.py): its
page names the job it would reclaim from and the time that job becomes reclaimable, and the job
starts within a cycle of that time. Short minimum runtime so the journey stays short."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from kai_portal.history.models import Decision, SchedulingCycle
from kai_portal.teams.models import Membership
from kai_portal.workloads.models import Job
from tests.browser.conftest import LiveLoop, screenshot, sign_in
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROTECTION = timedelta(seconds=20)


def _wait(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def test_blocked_job_names_the_protected_job_and_starts_when_it_becomes_reclaimable(
    page: Any, django_user_model: Any, live_loop: LiveLoop, settings: Any
) -> None:
    settings.SIMULATED_EVICTION_GRACE_SECONDS = 0
    factories.node("gpu-node-1", gpus=8)
    mine, theirs = factories.team("mine", name="Mine"), factories.team("theirs", name="Theirs")
    django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    dept = factories.queue("dept", gpu_quota=8)
    q_theirs = factories.queue(
        "q-theirs", parent=dept, team=theirs, gpu_quota=0, reclaim_min_runtime=PROTECTION
    )
    q_mine = factories.queue("q-mine", parent=dept, team=mine, gpu_quota=8)
    alice = django_user_model.objects.create_user("alice", password="pw")
    Membership(team=mine, user=alice).save()

    old = factories.job(q_theirs, "old-train", gpu_count=8, duration=timedelta(hours=2))
    _wait(lambda: Job.objects.get(pk=old.pk).started_at is not None, "old-train running")
    want = factories.job(q_mine, "want", gpu_count=8, duration=timedelta(minutes=5), submitter=alice)
    _wait(lambda: (Job.objects.get(pk=want.pk).blockers or {}).get("items"), "want's blockers recorded")
    old.refresh_from_db()
    ends = old.started_at + PROTECTION
    until = ends.replace(microsecond=0) + timedelta(
        seconds=1 if ends.microsecond else 0
    )  # shown: whole seconds

    sign_in(page, "root")
    page.goto(f"/jobs/{want.uid}/")
    blocked = page.locator("[data-testid=protected-job]")
    assert "old-train" in blocked.inner_text() and "q-theirs" in blocked.inner_text()
    assert blocked.locator("a").get_attribute("href") == f"/jobs/{old.uid}/"
    shown = datetime.fromisoformat(blocked.locator("[data-testid=reclaimable-at]").get_attribute("datetime"))
    assert shown == until
    assert f"{until:%Y-%m-%d %H:%M:%S}" in page.locator("[data-testid=what-would-change]").inner_text()
    assert page.locator("[data-testid=job-why]").count() == 1  # its pending-time message, while pending
    screenshot(page, "protected-wait-blockers")

    _wait(
        lambda: Job.objects.get(pk=want.pk).state == "running",
        "want running",
        timeout=PROTECTION.total_seconds() + 60,
    )
    # It started within a cycle of the time shown: reclaim evicted old-train in the first cycle that
    # began after its protection ended, and want was placed in that cycle or the next.
    first = SchedulingCycle.objects.filter(started_at__gte=ends).order_by("started_at").first()
    assert first is not None
    evicted = Decision.objects.get(job=old, kind="evicted", action="reclaim")
    assert evicted.cycle_id == first.pk, (evicted.cycle.started_at, until)
    placed = (
        Decision.objects.filter(job=want, kind__in=["allocated", "pipelined"]).order_by("cycle_id").first()
    )
    assert placed is not None and placed.cycle_id <= first.pk + 1
    assert first.started_at <= until + timedelta(seconds=5)  # the loop cycles every 0.5 s
    page.reload()
    assert page.locator("[data-testid=job-blockers]").count() == 0
    # Running now: the message of its pending time is no longer shown as current.
    assert page.locator("[data-testid=job-why]").count() == 0
