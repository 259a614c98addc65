"""axe-core (Deque's accessibility engine, vendored in static/vendor, pinned by its hash) on every
page, as a portal admin in the light theme and as a team member in the dark one (issue 31).

A critical or serious violation fails the test, with the rule, the page and the elements. The
pages are those of the demo `make run` seeds, after a few scheduling cycles: jobs running and
pending, queue history, showback and audit entries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from tests.browser.conftest import run_cycle, sign_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("demo_passwords"),
]

AXE = "vendor/axe-core-4.14.1.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # npm axe-core 4.14.1
FAILING_IMPACTS = ("critical", "serious")


def test_the_vendored_axe_is_the_pinned_release() -> None:
    data = (Path(settings.BASE_DIR) / "static" / AXE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == AXE_SHA256
    assert data.startswith(b"/*! axe v4.14.1")


@pytest.fixture
def demo(transactional_db: None) -> Iterator[None]:
    call_command("seed_demo", stdout=StringIO())
    start = timezone.now()
    for i in range(3):
        run_cycle(now=start + timedelta(seconds=5 * i))
    yield


def _pages(username: str) -> list[str]:
    """The pages to check, with a queue, a team and a job the user may see."""
    from django.contrib.auth import get_user_model

    from kai_portal.queues.models import Queue
    from kai_portal.teams.models import Team
    from kai_portal.workloads.models import Job

    user = get_user_model().objects.get(username=username)
    queues = Queue.objects.visible_to(user).filter(children__isnull=True, team__isnull=False)
    queue = queues.filter(jobs__isnull=False).order_by("name").first()
    team = Team.objects.visible_to(user).order_by("slug").first()
    job = Job.objects.visible_to(user).filter(queue=queue).order_by("-state").first()
    assert queue is not None and team is not None and job is not None
    admin = user.is_superuser
    pages = [
        "/cluster/", "/cluster/nodes/", "/queues/", f"/queues/{queue.name}/", "/jobs/", "/jobs/table/",
        f"/jobs/{job.uid}/", "/jobs/submit/", "/jobs/submit/yaml/", "/teams/", f"/teams/{team.slug}/",
        "/showback/", "/accounts/tokens/",
    ]  # fmt: skip
    if admin:
        pages += [f"/queues/{queue.name}/edit/", "/queues/new/", "/queues/new/import/"]
        pages += ["/audit/", "/fairness/", "/planner/", *_plans()]
    return pages


def _plans() -> list[str]:
    """A capacity plan with results (a day of the demo's history, fewer cycles to keep it short: the
    page is under test here, not the numbers) and one still waiting for the worker."""
    from unittest import mock

    from kai_portal.planning import replay
    from kai_portal.planning.models import PlanRun
    from kai_portal.planning.tasks import run_plan

    end = timezone.now()
    inputs = replay.PlanInputs(end - timedelta(days=1), end, {"vision": {"gpu_quota": 24.0}}, None).to_json()
    done, waiting = PlanRun.objects.create(inputs=inputs), PlanRun.objects.create(inputs=inputs)
    with mock.patch.object(replay, "MAX_CYCLES", 150):
        run_plan(done.pk)
    done.refresh_from_db()
    assert done.status == PlanRun.Status.SUCCEEDED, done.error
    return [f"/planner/{done.pk}/", f"/planner/{waiting.pk}/"]


def _violations(page: Any, path: str) -> list[str]:
    response = page.goto(path)
    assert response is not None and response.status == 200, f"{path}: {response.status if response else None}"
    page.wait_for_load_state("load")
    page.add_script_tag(url=f"/static/{AXE}")  # from the site itself: the CSP allows it
    results = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    found = []
    for v in results["violations"]:
        if v["impact"] in FAILING_IMPACTS:
            targets = "; ".join(" ".join(n["target"]) for n in v["nodes"][:5])
            found.append(f"{path}: {v['impact']} {v['id']} ({v['help']}): {targets}")
    return found


@pytest.mark.parametrize(("username", "password", "scheme"), [
    ("admin", "admin", "light"), ("vision-dev1", "demo", "dark"),
])  # fmt: skip
def test_no_page_has_a_critical_or_serious_axe_violation(
    chromium: Any, live_server: Any, settings: Any, demo: None, username: str, password: str, scheme: str
) -> None:
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 1400, "height": 900}, color_scheme=scheme
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        sign_in(page, username, password)
        problems = [p for path in _pages(username) for p in _violations(page, path)]
        page.context.clear_cookies()
        problems += _violations(page, "/accounts/login/")
    finally:
        context.close()
    assert not problems, "\n".join(problems)
