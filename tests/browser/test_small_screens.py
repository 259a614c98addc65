"""Small screens and long content: the navigation bar wraps on a 375 px phone, the audit table
stays within a 1,400 px window, and every quota-grid input has a label."""

from __future__ import annotations

from typing import Any

import pytest

from kai_portal.audit.models import AuditEntry
from tests.browser.conftest import screenshot, sign_in
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"
# For the failure message: the outermost elements that stick out to the right.
WIDEST = """[...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= window.innerWidth + 1)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


@pytest.fixture
def admin(django_user_model: Any) -> Any:
    factories.node("gpu-node-1", gpus=8)
    team = factories.team("alpha", name="Alpha with a long team name")
    factories.queue("research", gpu_quota=8)
    queue = factories.queue(
        "alpha-train", parent=factories.queue("dept", gpu_quota=4), team=team, gpu_quota=2
    )
    factories.job(queue, "alpha-job")
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


def test_navigation_wraps_at_375_px(page: Any, admin: Any) -> None:
    page.set_viewport_size({"width": 375, "height": 740})
    sign_in(page, "root")
    for path in ("/cluster/", "/queues/", "/jobs/", "/audit/"):
        page.goto(path)
        nav = page.locator("nav.mainnav")
        box = nav.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375, (path, box)
        last = nav.locator("a").last.bounding_box()
        assert last is not None and last["x"] + last["width"] <= 375, (path, last)
        assert page.evaluate(NO_SIDEWAYS_SCROLL), (path, page.evaluate(WIDEST))
    page.goto("/cluster/")
    screenshot(page, "small_screen_375_overview")


def test_audit_table_fits_1400_px_with_long_changes(page: Any, admin: Any) -> None:
    queue = factories.queue("a-queue-with-a-rather-long-name-for-the-audit-table", gpu_quota=1)
    long_value = "x" * 400
    AuditEntry.objects.create(
        action="update", object_id=str(queue.pk), object_repr=queue.name, actor_name="root", source="web",
        content_type_id=AuditEntry.objects.values_list("content_type_id", flat=True).first(),
        before={"display_name": ""}, after={"display_name": long_value},
    )  # fmt: skip
    sign_in(page, "root")
    page.goto("/audit/")
    table = page.locator("[data-testid=audit-table]")
    box = table.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1400
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    screenshot(page, "audit_table_1400")


def test_every_quota_grid_input_has_a_label(page: Any, admin: Any) -> None:
    sign_in(page, "root")
    page.goto("/queues/alpha-train/edit/")
    inputs = page.locator(".quota-grid input")
    assert inputs.count() == 9
    for i in range(inputs.count()):
        field = inputs.nth(i)
        label = field.evaluate("e => e.labels.length === 1 ? e.labels[0].textContent.trim() : ''")
        assert label, f"{field.get_attribute('name')} has no label"
        # The label is what a screen reader announces: finding the input by it gives this input back.
        assert page.get_by_label(label, exact=True).get_attribute("name") == field.get_attribute("name")
