"""The portal's main journeys, as a person walks them in Chromium. Each saves a screenshot."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from kai_portal.teams.models import Membership
from kai_portal.workloads.models import Job
from tests.browser.conftest import run_cycle, screenshot, sign_in, wait_until
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    """One 8-GPU node; department 'research' (8 GPUs) split between teams alpha and beta."""
    factories.node("gpu-node-1", pool="default", gpus=8)
    alpha, beta = factories.team("alpha", name="Alpha"), factories.team("beta", name="Beta")
    users = {
        "root": django_user_model.objects.create_superuser("root", "root@example.com", "pw"),
        "alice": django_user_model.objects.create_user("alice", password="pw"),
        "bob": django_user_model.objects.create_user("bob", password="pw"),
    }
    Membership(team=alpha, user=users["alice"]).save()
    Membership(team=beta, user=users["bob"]).save()
    research = factories.queue("research", gpu_quota=8)
    queues = {
        "alpha": factories.queue("alpha-train", parent=research, team=alpha, gpu_quota=2),
        "beta": factories.queue("beta-train", parent=research, team=beta, gpu_quota=2, gpu_limit=4),
    }
    return {"users": users, "queues": queues, "teams": {"alpha": alpha, "beta": beta}}


def _cycles(count: int = 1) -> None:
    start = timezone.now()
    for i in range(count):
        run_cycle(now=start + timedelta(seconds=i))


def test_admin_edits_quota_and_sees_fair_share_change_after_next_cycle(page: Any, world: dict) -> None:
    # Both teams want the whole cluster: 8 one-GPU tasks each.
    factories.job(world["queues"]["alpha"], "alpha-sweep", task_count=8, min_member=0)
    factories.job(world["queues"]["beta"], "beta-sweep", task_count=8, min_member=0)
    _cycles()

    sign_in(page, "root")
    page.goto("/queues/")
    alpha_share = page.locator('tr[data-queue="alpha-train"] [data-testid="fair-share"]')
    before = alpha_share.inner_text()
    assert before == "4"  # quotas 2 + 2, the other 4 GPUs split by equal weights

    page.goto("/queues/alpha-train/edit/")
    page.fill("#id_gpu_quota", "6")
    page.click("button:has-text('Save changes')")
    page.wait_for_url("**/queues/alpha-train/")
    assert "Fair shares change from the next scheduling cycle" in page.inner_text(".messages")

    _cycles()
    page.goto("/queues/")
    assert alpha_share.inner_text() == "6"
    assert page.locator('tr[data-queue="beta-train"] [data-testid="fair-share"]').inner_text() == "2"
    screenshot(page, "admin-quota-fair-share")

    page.goto("/audit/?model=queue")
    assert "gpu_quota" in page.inner_text("[data-testid=audit-table]")
    screenshot(page, "admin-audit-log")


def test_member_submits_fractional_gpu_job_and_watches_it_run(page: Any, world: dict) -> None:
    sign_in(page, "alice")
    assert "Alpha" in page.inner_text("[data-testid=whoami]")
    page.goto("/jobs/submit/")
    page.fill("#id_name", "notebook")
    page.select_option("#id_queue", label="alpha-train (Alpha) · pool default")
    page.check("input[name=gpu_mode][value=fraction]")
    page.fill("#id_gpu_fraction", "0.5")
    page.fill("#id_cpu_cores", "2")
    page.fill("#id_memory_mib", "4096")
    page.fill("#id_run_time", "1h")
    screenshot(page, "member-submit-form")
    page.click("button:has-text('Submit job')")
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}/$"))
    assert page.inner_text("[data-testid=job-state]") == "Pending"

    job = Job.objects.get(name="notebook")
    assert job.gpu_fraction == 0.5 and job.cpu_millicores == 2000 and job.submitter.username == "alice"
    for i in range(3):  # bind, then the simulated kubelet starts the pod
        run_cycle(now=timezone.now() + timedelta(seconds=i))
        job.refresh_from_db()
        if job.state == "running":
            break
    # The page polls every 3 s; no reload.
    wait_until(page, "document.querySelector('[data-testid=job-state]').innerText === 'Running'", timeout=8)
    assert "gpu-node-1" in page.inner_text("[data-testid=pod-table]")
    assert "Allocated" in page.inner_text("[data-testid=timeline]")
    screenshot(page, "member-job-running")


def test_member_cannot_open_another_teams_job_or_edit_quotas(page: Any, world: dict) -> None:
    other = factories.job(world["queues"]["beta"], "beta-secret")
    sign_in(page, "alice")

    response = page.goto(f"/jobs/{other.uid}/")
    assert response.status == 404
    if not settings.DEBUG:  # with DEBUG on (make run's SQLite run) Django shows its technical 404 page
        assert page.locator("[data-testid=not-found]").is_visible()

    response = page.goto("/queues/alpha-train/edit/")
    assert response.status == 403
    screenshot(page, "member-refused-quota-edit")
    assert page.goto("/queues/beta-train/").status == 404
    assert page.goto("/audit/").status == 403

    # The API agrees with the pages, on the same session.
    assert page.request.get(f"/api/v1/jobs/{other.uid}/").status == 404
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    patch = page.request.patch(
        "/api/v1/queues/alpha-train/", data={"gpu_quota": 8}, headers={"X-CSRFToken": csrf}
    )
    assert patch.status == 403
    page.goto("/jobs/")
    assert "beta-secret" not in page.inner_text("[data-testid=job-table]")


def test_job_that_cannot_fit_shows_the_blocking_queue_limit(page: Any, world: dict) -> None:
    blocked = factories.job(world["queues"]["beta"], "too-big", gpu_count=6)  # beta's limit is 4
    huge = factories.job(world["queues"]["alpha"], "no-node-fits", gpu_count=16)  # nodes have 8
    _cycles()

    sign_in(page, "bob")
    page.goto(f"/jobs/{blocked.uid}/")
    why = page.inner_text("[data-testid=job-why]")
    assert "beta-train quota has reached the allowable limit of GPUs" in why
    screenshot(page, "job-blocked-by-queue-limit")

    page.context.clear_cookies()
    sign_in(page, "alice")
    page.goto(f"/jobs/{huge.uid}/")
    why = page.inner_text("[data-testid=job-why]")
    assert "GPU" in why and ("enough resources" in why or "topped at 8" in why)
    screenshot(page, "job-missing-resources")


def test_overview_and_queue_history_draw_their_charts(page: Any, world: dict) -> None:
    factories.job(world["queues"]["alpha"], "alpha-sweep", task_count=6, min_member=0)
    factories.job(world["queues"]["beta"], "beta-sweep", task_count=6, min_member=0)
    start = timezone.now() - timedelta(minutes=40)
    for i in range(20):
        run_cycle(now=start + timedelta(minutes=2 * i))

    sign_in(page, "root")
    assert page.locator("canvas[data-chart=overview]").is_visible()
    wait_until(page, "document.querySelector('canvas[data-chart=overview]')._chart !== undefined")
    assert "/ 8" in page.inner_text("[data-testid=tile-gpus]")
    screenshot(page, "cluster-overview")

    page.goto("/queues/alpha-train/")
    page.click("a[role=tab]:has-text('Hour')")
    wait_until(page, "document.querySelector('canvas[data-chart=history]')?._chart !== undefined")
    assert "samples" in page.inner_text("#queue-history")
    screenshot(page, "queue-history")
