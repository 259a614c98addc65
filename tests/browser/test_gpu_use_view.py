"""The idle-GPU view in Chromium, on a real Prometheus scraping a stand-in DCGM exporter: a team
member sees their job allocated but idle on its page and their team's idle GPUs in showback, and
nothing of another team's; axe finds no critical or serious violation on either page."""

from __future__ import annotations

from typing import Any

import pytest

from kai_portal.monitoring import gpu_use
from tests.browser.conftest import screenshot, sign_in
from tests.browser.test_axe import _violations
from tests.portal.monitoring.conftest import prometheus  # noqa: F401  (the session's Prometheus)
from tests.portal.monitoring.prometheus_server import PrometheusServer, StandInExporter
from tests.portal.monitoring.test_gpu_use import build_world


@pytest.fixture
def world(transactional_db: None, django_user_model: Any) -> dict[str, Any]:
    return build_world(django_user_model)


def test_a_member_sees_their_idle_gpus_and_no_other_teams(
    page: Any,
    world: dict[str, Any],
    prometheus: tuple[PrometheusServer, StandInExporter],  # noqa: F811 (the imported fixture)
    settings: Any,
) -> None:
    server, exporter = prometheus
    exporter.gpus = world["gpus"]
    settings.PROMETHEUS_URL = server.url
    settings.GPU_USE_WINDOW_MINUTES = 1
    names = "|".join(q.name for q in world["queues"].values())
    server.wait_for(f'DCGM_FI_DEV_GPU_UTIL{{namespace=~"{names}"}}', 4)
    assert gpu_use.read_gpu_use().outcome == "ok"

    sign_in(page, "bob")  # beta's member: the idle job is theirs
    job = world["jobs"]["idle"]
    page.goto(f"/jobs/{job.uid}/")
    idle = page.get_by_test_id("gpu-use-idle")
    assert idle.is_visible() and "averaged 1.0 %" in idle.inner_text()
    screenshot(page, "gpu-use-job-idle")
    page.goto("/showback/")
    teams = page.get_by_test_id("gpu-use-teams").inner_text()
    assert "Beta" in teams and "Alpha" not in teams
    assert world["queues"]["alpha"].name not in page.content()
    screenshot(page, "gpu-use-showback")
    problems = _violations(page, f"/jobs/{job.uid}/") + _violations(page, "/showback/")
    assert not problems, "\n".join(problems)
