"""The Content-Security-Policy is on every page, and every page still works under it (issue 14).

Chromium reports each blocked script, style or handler as a ``securitypolicyviolation``
event; the pages below are the ones with scripts: htmx fragments and the fit check, the GPU
fields of the submit form, Chart.js charts, the team role selector, Swagger UI and ReDoc.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from kai_portal.teams.models import Membership
from tests.browser.conftest import run_cycle, sign_in, wait_until
from tests.portal import factories

pytestmark = pytest.mark.browser

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', e =>
  window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + e.sourceFile));
"""


@pytest.fixture
def world(django_user_model: Any) -> dict[str, Any]:
    factories.node("gpu-node-1", gpus=8)
    beta = factories.team("beta", name="Beta")
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    bob = django_user_model.objects.create_user("bob", password="pw")
    Membership(team=beta, user=bob).save()
    research = factories.queue("research", gpu_quota=8)
    queue = factories.queue("beta-train", parent=research, team=beta, gpu_quota=2, gpu_limit=4)
    factories.job(queue, "sweep", task_count=3, min_member=0)
    start = timezone.now() - timedelta(minutes=20)
    for i in range(10):
        run_cycle(now=start + timedelta(minutes=2 * i))
    return {"root": root, "bob": bob, "team": beta}


def _violations(page: Any) -> list[str]:
    return page.evaluate("window.__cspViolations")  # type: ignore[no-any-return]


def test_pages_work_under_the_csp_with_no_violations(page: Any, world: dict) -> None:
    page.add_init_script(RECORD_VIOLATIONS)
    seen: list[str] = []
    page.on("console", lambda msg: seen.append(msg.text) if "Content Security Policy" in msg.text else None)

    response = page.goto("/accounts/login/")
    policy = response.headers["content-security-policy"]
    assert (
        "script-src 'self'" in policy and "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    )
    sign_in(page, "root")
    wait_until(page, "document.querySelector('canvas[data-chart=overview]')._chart !== undefined")
    assert _violations(page) == []

    page.goto("/queues/beta-train/")
    page.click("a[role=tab]:has-text('Hour')")  # an htmx fragment with a Chart.js chart
    wait_until(page, "document.querySelector('canvas[data-chart=history]')?._chart !== undefined")
    assert _violations(page) == []

    # The submit form: GPU fields follow the mode (static/js/forms.js), the fit check is htmx.
    page.goto("/jobs/submit/")
    page.check("input[name=gpu_mode][value=fraction]")
    assert page.locator("#id_gpu_fraction").is_visible() and not page.locator("#id_gpu_count").is_visible()
    page.check("input[name=gpu_mode][value=whole]")
    assert page.locator("#id_gpu_count").is_visible() and not page.locator("#id_gpu_fraction").is_visible()
    page.select_option("#id_queue", label="beta-train (Beta) · pool default")
    page.fill("#id_gpu_count", "1")
    page.locator('[data-testid=fit-verdict][data-verdict="starts_now"]').wait_for()
    assert _violations(page) == []

    # The team page's role selector submits itself.
    page.goto(f"/teams/{world['team'].slug}/")
    with page.expect_navigation():
        page.select_option("[data-testid=members] select[name=role]", "admin")
    assert Membership.objects.get(user=world["bob"]).role == "admin"
    assert _violations(page) == []

    page.goto("/api/docs/")
    page.locator(".swagger-ui .info .title", has_text="KAI Portal API").wait_for()
    assert _violations(page) == []
    page.goto("/api/redoc/")
    page.locator("h1", has_text="KAI Portal API").wait_for()
    # ReDoc's bundle hard-codes Redocly's logo on their CDN: the one thing refused, by design
    # (nothing loads from other sites); the documentation itself renders.
    assert _violations(page) == ["img-src https://cdn.redoc.ly/redoc/logo-mini.svg "]
    assert [text for text in seen if "cdn.redoc.ly" not in text] == []


def test_cancel_asks_for_confirmation_without_inline_script(page: Any, world: dict) -> None:
    """The job page's cancel button asks first (a data-confirm form, not an inline handler):
    dismissing keeps the job, accepting cancels it."""
    from kai_portal.workloads.models import Job

    page.add_init_script(RECORD_VIOLATIONS)
    job = Job.objects.get(name="sweep")
    sign_in(page, "root")  # a portal admin may cancel any job
    page.goto(f"/jobs/{job.uid}/")
    asked: list[str] = []

    def answer(dialog: Any, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.click("form[data-confirm] button[type=submit]")
    page.wait_for_timeout(300)
    job.refresh_from_db()
    assert asked == ["Cancel job sweep?"] and job.state != "cancelled"
    page.once("dialog", lambda d: answer(d, True))
    page.click("form[data-confirm] button[type=submit]")
    page.wait_for_load_state()
    wait_until(page, "!document.querySelector('form[data-confirm]')")
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert _violations(page) == []
