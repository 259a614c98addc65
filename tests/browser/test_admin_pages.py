"""Journeys through the pages an admin expects: Queue YAML import, nodes and pools, the
workloads table with CSV, copy-and-edit, view YAML, showback; and the submit warnings."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job
from tests.browser.conftest import run_cycle, screenshot, sign_in
from tests.browser.test_journeys import world  # noqa: F401  (fixture)
from tests.portal import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUEUES = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 8, limit: -1, overQuotaWeight: 1}
    memory: {quota: 100000, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: gamma-train}
spec:
  parentQueue: research
  resources:
    gpu: {quota: 2, limit: -1, overQuotaWeight: 1}
    memory:{quota: 1000, limit: -1, overQuotaWeight: 1}
"""


def test_admin_imports_queue_yaml_fixing_the_line_the_error_points_at(page: Any, world: dict) -> None:  # noqa: F811
    sign_in(page, "root")
    page.goto("/queues/")
    page.click("text=Import YAML")
    page.fill("#id_text", QUEUES)
    page.click("[data-testid=preview-import]")
    error = page.inner_text("[data-testid=import-error]")
    assert "document 2 (queue 'gamma-train'), line 16" in error and "put a space after 'memory:'" in error
    assert ">  16 |     memory:{quota" in error
    screenshot(page, "queue_import_error")

    page.fill("#id_text", QUEUES.replace("memory:{", "memory: {"))
    page.click("[data-testid=preview-import]")
    preview = page.inner_text("[data-testid=import-preview]")
    assert "gamma-train" in preview and "create" in preview
    assert not Queue.objects.filter(name="gamma-train").exists()
    screenshot(page, "queue_import_preview")
    page.click("[data-testid=apply-import]")
    page.wait_for_url("**/queues/")
    assert "Imported 1 new and 1 updated queue(s)" in page.inner_text(".messages")
    assert Queue.objects.get(name="gamma-train").parent.name == "research"

    page.goto("/queues/gamma-train/")
    page.click("[data-testid=view-yaml]")
    assert "parentQueue: research" in page.inner_text("body")


def test_nodes_page_shows_devices_pods_and_pool_history(page: Any, world: dict) -> None:  # noqa: F811
    factories.job(world["queues"]["alpha"], "shared", gpu_count=0, gpu_fraction=Decimal("0.5"))
    factories.job(world["queues"]["beta"], "whole", gpu_count=2)
    for i in range(2):
        run_cycle(now=timezone.now() + timedelta(seconds=i))
    sign_in(page, "root")
    page.click("nav.mainnav >> text=Nodes")
    row = page.locator('tr[data-node="gpu-node-1"]')
    assert row.locator("[data-testid=node-gpus]").inner_text() == "2.5 / 8"
    assert "shared-0" in row.inner_text() and "whole-0" in row.inner_text() and "50%" in row.inner_text()
    assert page.locator("[data-testid=pool-chart] canvas").count() == 1
    page.wait_for_function("document.querySelector('[data-testid=pool-chart] canvas')._chart !== undefined")
    screenshot(page, "nodes_page")


def test_member_sorts_filters_exports_and_copies_a_job(page: Any, world: dict) -> None:  # noqa: F811
    alpha = world["queues"]["alpha"]
    for name, gpus in (("zeta", 1), ("alpha-one", 2), ("mid", 1)):
        factories.job(alpha, name, gpu_count=gpus, submitter=world["users"]["alice"])
    factories.job(world["queues"]["beta"], "hidden")
    sign_in(page, "alice")
    page.goto("/jobs/")
    page.click("text=Table, sort and CSV")
    page.click("[data-sort=name]")
    names = page.locator("[data-testid=workload-table] tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.job)"
    )
    assert names == ["alpha-one", "mid", "zeta"]  # beta's job is not shown to alice
    page.click("[data-sort=name]")  # again: descending
    assert page.locator("[data-testid=workload-table] tbody tr").first.get_attribute("data-job") == "zeta"
    page.select_option("select[name=queue]", "alpha-train")
    page.click("button:has-text('Filter')")
    assert "sort=-name" in page.url and "queue=alpha-train" in page.url
    href = page.get_attribute("[data-testid=csv-link]", "href")
    assert "sort=-name" in href and "queue=alpha-train" in href
    with page.expect_download() as download:
        page.click("[data-testid=csv-link]")
    text = Path(download.value.path()).read_text()
    assert [line.split(",")[1] for line in text.splitlines()[1:]] == ["zeta", "mid", "alpha-one"]
    screenshot(page, "workload_table")

    page.click("[data-testid=workload-table] >> text=alpha-one")
    page.click("[data-testid=copy-job]")
    assert page.input_value("#id_name") == "alpha-one-copy"
    assert page.input_value("#id_gpu_count") == "2"
    page.fill("#id_gpu_count", "3")
    page.click("button:has-text('Submit job')")
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}/$"))
    copy = Job.objects.get(name="alpha-one-copy")
    assert (copy.queue.name, copy.gpu_count) == ("alpha-train", 3)
    page.click("[data-testid=view-yaml]")
    assert 'nvidia.com/gpu: "3"' in page.inner_text("body") or "nvidia.com/gpu: '3'" in page.inner_text(
        "body"
    )


def test_submit_warns_before_a_job_that_can_never_fit(page: Any, world: dict) -> None:  # noqa: F811
    sign_in(page, "bob")  # beta-train: limit 4 GPUs
    page.goto("/jobs/submit/")
    page.fill("#id_name", "too-much")
    page.select_option("#id_queue", label="beta-train (Beta) · pool default")
    page.fill("#id_gpu_count", "6")
    page.click("button:has-text('Submit job')")
    warning = page.inner_text("[data-testid=submit-warnings]")
    assert "Can never fit" in warning
    assert not Job.objects.filter(name="too-much").exists()
    page.fill("#id_gpu_count", "9")  # more than the 8-GPU node: refused outright
    page.click("button:has-text('Submit job')")
    assert "no node in the default pool has more than 8 GPUs" in page.inner_text("#field-gpu_count")
    page.fill("#id_gpu_count", "6")
    page.click("button:has-text('Submit job')")
    page.click("[data-testid=submit-anyway]")
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}/$"))
    assert Job.objects.filter(name="too-much").exists()


def test_showback_page_draws_its_chart(page: Any, world: dict) -> None:  # noqa: F811
    factories.job(world["queues"]["alpha"], "burner", gpu_count=2)
    for i in range(3):
        run_cycle(now=timezone.now() + timedelta(seconds=5 * i))
    sign_in(page, "root")
    page.click("nav.mainnav >> text=Showback")
    assert "alpha-train" in page.inner_text("[data-testid=queue-hours]")
    page.wait_for_function("document.querySelector('canvas[data-chart=stacked]')._chart !== undefined")
    screenshot(page, "showback")
