"""An admin previews a quota cut on the quota form before saving it (issue 10, what-if)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from kai_portal.queues.models import Queue
from kai_portal.teams.models import Membership
from tests.browser.conftest import run_cycle, screenshot, sign_in
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def crowded(django_user_model: Any) -> None:
    """Alpha runs 8 one-GPU jobs on the 8-GPU node under its 8-GPU quota; beta waits with 2."""
    factories.node("gpu-node-1", gpus=8)
    alpha, beta = factories.team("alpha", name="Alpha"), factories.team("beta", name="Beta")
    django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    bob = django_user_model.objects.create_user("bob", password="pw")
    Membership(team=beta, user=bob).save()
    research = factories.queue("research", gpu_quota=8)
    a = factories.queue("alpha-train", parent=research, team=alpha, gpu_quota=8)
    b = factories.queue("beta-train", parent=research, team=beta, gpu_quota=0)
    for i in range(8):
        factories.job(a, f"alpha-{i}", duration=timedelta(hours=2))
    start = timezone.now()
    run_cycle(now=start)
    for i in range(2):
        factories.job(b, f"beta-{i}", duration=timedelta(hours=2))
    run_cycle(now=start + timedelta(seconds=1))


def test_admin_previews_a_quota_cut_and_sees_shares_evictions_and_the_warning(
    page: Any, crowded: None
) -> None:
    sign_in(page, "root")
    page.goto("/queues/alpha-train/edit/")
    page.fill("#id_gpu_quota", "4")
    page.click("[data-testid=preview-button]")

    table = page.locator("[data-testid=preview-table]")
    table.wait_for()
    alpha_fair = table.locator('tr[data-queue="alpha-train"] td[data-fair="gpu"]')
    beta_fair = table.locator('tr[data-queue="beta-train"] td[data-fair="gpu"]')
    assert alpha_fair.inner_text().split() == ["8", "→", "6"]
    assert beta_fair.inner_text().split() == ["0", "→", "2"]
    warning = page.locator("[data-testid=preview-warning]").first.inner_text()
    assert "is below the 8 GPUs alpha-train uses now: 4 GPUs above the quota" in warning
    assert page.locator("[data-testid=preview-evicted] li").count() == 2
    assert page.locator("[data-testid=preview-start] li").count() == 2
    screenshot(page, "whatif_quota_preview")
    # Nothing was saved by previewing.
    assert Queue.objects.get(name="alpha-train").gpu_quota == 8

    # An invalid value is explained instead of previewed.
    page.fill("#id_gpu_limit", "2")
    page.click("[data-testid=preview-button]")
    page.locator("[data-testid=preview-errors]").wait_for()
    assert "must be at least the quota" in page.locator("[data-testid=preview-errors]").inner_text()
