"""A member sees the fit verdict change as they edit the submit form (issue 10, fit check)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kai_portal.teams.models import Membership
from kai_portal.workloads.models import Job
from tests.browser.conftest import failed_request, screenshot, sign_in
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(django_user_model: Any) -> None:
    factories.node("gpu-node-1", gpus=8)
    beta = factories.team("beta", name="Beta")
    bob = django_user_model.objects.create_user("bob", password="pw")
    Membership(team=beta, user=bob).save()
    research = factories.queue("research", gpu_quota=8)
    factories.queue("beta-train", parent=research, team=beta, gpu_quota=2, gpu_limit=4)


def _verdict(page: Any, expected: str) -> Any:
    box = page.locator(f'[data-testid=fit-verdict][data-verdict="{expected}"]')
    box.wait_for()
    return box


def test_member_sees_the_fit_verdict_follow_the_gpu_count(page: Any, world: None) -> None:
    sign_in(page, "bob")
    page.goto("/jobs/submit/")
    page.select_option("#id_queue", label="beta-train (Beta) · pool default")
    page.fill("#id_gpu_count", "1")
    starts = _verdict(page, "starts_now")
    assert "Starts now: 1 task fit on gpu-node-1." in starts.inner_text()
    screenshot(page, "whatif_fit_check_starts_now")

    page.fill("#id_gpu_count", "16")
    never = _verdict(page, "never_fits")
    # The engine stops at the first failed check (the queue limit); the node size is named too.
    assert "Can never fit: it asks for more than the limit of queue beta-train" in never.inner_text()
    assert "Also, no node in the default pool has more than 8 GPUs." in never.inner_text()
    screenshot(page, "whatif_fit_check_never_fits")

    page.fill("#id_gpu_count", "5")
    over = page.locator('[data-testid=fit-verdict][data-verdict="never_fits"]', has_text="requested 5 GPUs")
    over.wait_for()
    assert "more than the limit of queue beta-train" in over.inner_text()
    assert "Limit is 4 GPUs" in over.inner_text() and "Also" not in over.inner_text()

    # The form still submits normally; the fit check never created anything.
    assert not Job.objects.exists()
    page.fill("#id_gpu_count", "2")
    _verdict(page, "starts_now")
    page.fill("#id_name", "from-browser")
    page.click("button:has-text('Submit job')")
    page.wait_for_url("**/jobs/*/")
    assert Job.objects.get().gpu_count == 2



@pytest.fixture
def slow_fit_check(monkeypatch: Any) -> None:
    """The fit check as it answers on a busy cluster (seconds with 10,000 pending pods)."""
    import time

    from kai_portal.web.workloads import views

    real = views.check_fit

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(views, "check_fit", slow)


def _record(page: Any) -> tuple[list[str], list[Any]]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("requestfailed", lambda r: errors.append(said) if (said := failed_request(r)) else None)
    checks: list[Any] = []
    page.on("request", lambda r: checks.append(r) if "fit-check" in r.url else None)
    return errors, checks


def test_editing_while_the_fit_check_runs_gives_the_latest_verdict_without_console_errors(
    page: Any, world: None, slow_fit_check: None
) -> None:
    """A new edit used to abort the check in flight (hx-sync replace), which htmx reports as console
    errors (htmx:sendAbort); now it waits for it, then checks the latest values."""
    errors, checks = _record(page)
    sign_in(page, "bob")
    page.goto("/jobs/submit/")
    page.select_option("#id_queue", label="beta-train (Beta) · pool default")
    with page.expect_request("**/jobs/submit/fit-check/"):
        page.fill("#id_gpu_count", "1")
    page.fill("#id_gpu_count", "16")  # while the first check is still running
    never = _verdict(page, "never_fits")
    assert "requested 16 GPUs" in never.inner_text()
    assert errors == [], errors
    assert "gpu_count=16" in (checks[-1].post_data or "")


def test_submitting_while_the_fit_check_runs_sends_the_job_without_console_errors(
    page: Any, world: None, slow_fit_check: None
) -> None:
    """A quick user clicks Submit while the fit check is on its way: the click's blur used to start
    another check that aborted the first (console errors). Once the form is sent, no check starts."""
    errors, checks = _record(page)
    sign_in(page, "bob")
    page.goto("/jobs/submit/")
    page.fill("#id_name", "quick")
    page.select_option("#id_queue", label="beta-train (Beta) · pool default")
    with page.expect_request("**/jobs/submit/fit-check/"):
        page.fill("#id_gpu_count", "1")
    page.click("button:has-text('Submit job')")  # the check is in flight
    page.wait_for_url(re.compile(r"/jobs/[0-9a-f-]{36}/$"))
    page.wait_for_load_state("networkidle")
    assert Job.objects.get().name == "quick"
    assert errors == [] and len(checks) == 1, (errors, [c.url for c in checks])
