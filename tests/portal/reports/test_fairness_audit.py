"""The fairness audit's findings from usage history and the engine; page and API for admins only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

import scheduler
from kai_portal.history.models import UsageSample
from kai_portal.previews import forecast_store
from kai_portal.reports import fairness_audit
from kai_portal.scheduling import snapshot
from tests.portal import factories
from tests.portal.reports.conftest import T0

pytestmark = pytest.mark.django_db


def samples(queue: Any, minutes: int, every: int = 5, **numbers: float) -> None:
    """GPU samples every ``every`` minutes for ``minutes`` up to T0."""
    UsageSample.objects.bulk_create(
        UsageSample(queue=queue, resource="gpu", sampled_at=T0 - timedelta(minutes=m), **numbers)
        for m in range(0, minutes + 1, every)
    )


def test_starved_borrowing_and_idle_queues_are_found_with_evidence(department):
    starved = factories.queue("starved", parent=department, gpu_quota=4)
    borrower = factories.queue("borrower", parent=department, gpu_quota=2)
    idle = factories.queue("idle", parent=department, gpu_quota=2)
    short = factories.queue("short", parent=department, gpu_quota=1)
    samples(starved, 60, allocated=1, requested=6, deserved=4, fair_share=4)
    # before the starved run: a sample that was fine
    UsageSample.objects.create(queue=starved, resource="gpu", sampled_at=T0 - timedelta(minutes=65),
                               allocated=4, requested=4, deserved=4, fair_share=4)  # fmt: skip
    samples(borrower, 45, allocated=6, requested=6, deserved=2, fair_share=5)
    samples(idle, 3 * 24 * 60, every=60, allocated=0, requested=0, deserved=2, fair_share=0)
    samples(short, 10, allocated=0, requested=3, deserved=2, fair_share=2)  # starved only 10 min

    findings = fairness_audit.audit(T0)
    by = {(f.queue, f.kind): f for f in findings}
    assert set(by) == {("starved", "starved"), ("borrower", "borrowing"), ("idle", "idle_quota")}

    s = by[("starved", "starved")]
    assert s.since == T0 - timedelta(minutes=60)  # the first starved sample
    assert (s.evidence["allocated_avg"], s.evidence["fair_share_avg"], s.evidence["gap"]) == (1.0, 4.0, 3.0)
    b = by[("borrower", "borrowing")]
    assert (b.evidence["over_quota"], b.evidence["over_fair_share"]) == (4.0, 1.0)
    assert "2 above quota" not in b.summary and "4 above quota" in b.summary
    i = by[("idle", "idle_quota")]
    assert i.evidence["suggested_quota"] == 0
    assert i.action.startswith("Lower idle's quota from 2 to 0 GPUs — it has used ≤ 0 for 3 days")


def test_a_queue_that_recovered_is_not_starved(department):
    q = factories.queue("q", parent=department, gpu_quota=4)
    samples(q, 60, allocated=1, requested=6, deserved=4, fair_share=4)
    UsageSample.objects.create(queue=q, resource="gpu", sampled_at=T0 + timedelta(minutes=1),
                               allocated=4, requested=6, deserved=4, fair_share=4)  # fmt: skip
    assert fairness_audit.audit(T0 + timedelta(minutes=1)) == []


def test_head_of_line_gang_that_cannot_fit_is_found_by_the_engine(loop, leaf):
    factories.node("n1", gpus=4)
    gang = factories.job(leaf, "big-gang", gpu_count=2, task_count=4, min_member=4)  # 8 GPUs
    factories.job(leaf, "small", gpu_count=1)
    from kai_portal.workloads.models import Job

    Job.objects.filter(pk=gang.pk).update(created_at=loop.now - timedelta(hours=2))
    loop.run()
    findings = fairness_audit.audit(loop.now)
    hol = [f for f in findings if f.kind == "head_of_line"]
    assert len(hol) == 1
    f = hol[0]
    assert f.queue == "leaf" and f.job_uid == str(gang.uid)
    assert (f.evidence["gang_gpus"], f.evidence["gang_pods"], f.evidence["waited_minutes"]) == (8, 4, 120)
    assert f.evidence["smaller_jobs_behind"] == 0 or f.details == ["small"]
    assert "the largest pool has" in f.action and "reduce its size or add nodes" in f.action


def test_page_and_api_are_for_portal_admins_only(portal_admin, django_user_model, department):
    member = django_user_model.objects.create_user("alice", password="pw")
    q = factories.queue("starved", parent=department, gpu_quota=4)
    samples(q, 60, allocated=0, requested=6, deserved=4, fair_share=4)
    c = Client()
    c.force_login(member)
    assert c.get("/fairness/").status_code == 403
    c.force_login(portal_admin)
    page = c.get("/fairness/")
    assert page.status_code == 200 and "Starved below fair share" in page.content.decode()

    api = APIClient()
    api.force_authenticate(member)
    assert api.get("/api/v1/fairness-audit/").status_code == 403
    api.force_authenticate(portal_admin)
    body = api.get("/api/v1/fairness-audit/").json()
    assert body["count"] >= 1 and body["results"][0]["kind"] == "starved"
    assert body["results"][0]["queue"] == "starved" and "evidence" in body["results"][0]


def test_a_queue_whose_only_demand_can_never_fit_is_not_starved(department):
    q = factories.queue("hopeless", parent=department, gpu_quota=4)
    # Submitted before the cluster was observed: submission refuses it once an 8-GPU node is known.
    factories.job(q, "too-big", gpu_count=16)
    factories.node("n1", gpus=8)
    samples(q, 60, allocated=0, requested=16, deserved=4, fair_share=4)
    forecast_store.refresh(T0, budget_s=5)  # the worker's post-cycle fit check
    assert [f for f in fairness_audit.audit(T0) if f.kind == "starved"] == []

    # One job that could start makes the same history a starvation finding again.
    factories.job(q, "fits", gpu_count=2)
    assert [(f.queue, f.kind) for f in fairness_audit.audit(T0) if f.kind == "starved"] == [
        ("hopeless", "starved")
    ], "a job the worker has not fit-checked yet counts as one that could start"
    forecast_store.refresh(T0, budget_s=5)
    assert [(f.queue, f.kind) for f in fairness_audit.audit(T0) if f.kind == "starved"] == [
        ("hopeless", "starved")
    ]


def test_demand_above_the_queue_limit_is_not_starvation(department):
    q = factories.queue("capped", parent=department, gpu_quota=2, gpu_limit=2)
    factories.node("n1", gpus=8)
    factories.job(q, "over-limit", gpu_count=4)
    samples(q, 60, allocated=0, requested=4, deserved=2, fair_share=2)
    forecast_store.refresh(T0, budget_s=5)
    assert [f for f in fairness_audit.audit(T0) if f.kind == "starved"] == []


def test_the_audit_page_never_runs_the_engine(loop, leaf, portal_admin, monkeypatch):
    """Large clusters make an engine run take seconds: the page reads what the worker stored."""
    factories.node("n1", gpus=4)
    gang = factories.job(leaf, "big-gang", gpu_count=2, task_count=4, min_member=4)
    factories.job(leaf, "small", gpu_count=1)
    from kai_portal.workloads.models import Job

    Job.objects.filter(pk=gang.pk).update(created_at=loop.now - timedelta(hours=2))
    loop.run()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the fairness audit ran the engine inside a request")

    monkeypatch.setattr(snapshot, "_nodes", refuse)  # every snapshot build goes through it
    monkeypatch.setattr(scheduler, "run_cycle", refuse)
    c = Client()
    c.force_login(portal_admin)
    page = c.get("/fairness/").content.decode()
    assert "Head-of-line blocking" in page and "big-gang" in page
