"""Planner pages: admins only, bounded inputs refused naming the field (nothing stored), a run
stored, audited and sent to the worker (never run in the request), then its results and CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from kai_portal.audit.models import AuditEntry
from kai_portal.planning import tasks
from kai_portal.planning.models import PlanRun
from kai_portal.teams.models import Membership
from tests.portal.planning.seeded_week import seed_week

pytestmark = pytest.mark.django_db
FMT = "%Y-%m-%dT%H:%M"


@pytest.fixture
def week() -> dict[str, Any]:
    return seed_week(timezone.now().replace(second=0, microsecond=0))


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What the request sends to the worker (the broker call is recorded, not run)."""
    calls: list[int] = []
    monkeypatch.setattr(tasks.run_plan, "delay", calls.append)
    return calls


@pytest.fixture
def admin_client(portal_admin: Any) -> Client:
    c = Client()
    c.force_login(portal_admin)
    return c


def _form(week: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Today's values for every field, then ``changes`` (``alpha_gpu_quota=12`` style for queues)."""
    data: dict[str, Any] = {
        "window_start": week["start"].strftime(FMT), "window_end": week["end"].strftime(FMT),
        "extra_count": "0", "extra_gpus_per_node": "8",
    }  # fmt: skip
    for q in (week["dept"], week["alpha"], week["beta"]):
        data[f"q{q.pk}_gpu_quota"] = str(q.gpu_quota)
        data[f"q{q.pk}_gpu_limit"] = str(q.gpu_limit)
        data[f"q{q.pk}_gpu_weight"] = str(q.gpu_over_quota_weight)
    for key, value in changes.items():
        name, _, field = key.partition("_")
        if name in ("alpha", "beta", "dept"):
            data[f"q{week[name].pk}_{field}"] = str(value)
        else:
            data[key] = str(value)
    return data


def test_a_member_gets_403_on_every_planner_page(django_user_model: Any, week: dict[str, Any]) -> None:
    member = django_user_model.objects.create_user("alice", password="pw")
    Membership.objects.create(team=week["alpha"].team, user=member, role=Membership.Role.ADMIN)
    plan = PlanRun.objects.create(inputs={})
    c = Client()
    c.force_login(member)
    for path in ("/planner/", f"/planner/{plan.pk}/", f"/planner/{plan.pk}/progress/",
                 f"/planner/{plan.pk}/status.json", f"/planner/{plan.pk}/plan.csv"):  # fmt: skip
        assert c.get(path).status_code == 403, path
    assert c.post("/planner/", _form(week, alpha_gpu_quota=12)).status_code == 403
    assert PlanRun.objects.count() == 1
    anonymous = Client().get("/planner/")
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_the_form_opens_on_the_last_week_and_todays_queue_values(
    admin_client: Client, week: dict[str, Any]
) -> None:
    page = admin_client.get("/planner/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'href="/planner/"' in html and ">Planner</a>" in html  # in the nav
    form = page.context["form"]
    assert form[f"q{week['alpha'].pk}_gpu_quota"].value() == week["today_quota"]["alpha"]
    assert form["window_end"].value() == timezone.localtime(form.now).strftime(FMT)


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        (
            {"window_start": "2026-01-01T00:00", "window_end": "2026-02-01T00:00"},
            "window_end", "Window end: a plan replays at most 14 days",
        ),
        ({"window_end": "2099-01-01T00:00"}, "window_end", "Window end: the history ends now"),
        ({"window_start": "not a date"}, "window_start", "Window start: enter a date and time"),
        (
            {"window_start": "2020-01-01T00:00", "window_end": "2020-01-05T00:00"},
            "window_start", "Window start: no job was submitted",
        ),
        (
            {"alpha_gpu_quota": "8", "alpha_gpu_limit": "6"},
            "alpha_gpu_limit", "alpha GPU limit: 6 is below the quota 8",
        ),
        ({"beta_gpu_quota": "-5"}, "beta_gpu_quota", "beta GPU quota: enter 0 to"),
        ({"beta_gpu_weight": "abc"}, "beta_gpu_weight", "beta GPU over-quota weight: enter a number"),
        ({"extra_count": "65"}, "extra_count", "Extra nodes: at most 64 per plan."),
        (
            {"extra_count": "2", "extra_gpus_per_node": "40"},
            "extra_gpus_per_node", "GPUs per node: at most 16.",
        ),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(
    admin_client: Client,
    week: dict[str, Any],
    sent: list[int],
    changes: dict[str, str],
    field: str,
    words: str,
) -> None:
    data = _form(week, **changes)
    page = admin_client.post("/planner/", data)
    assert page.status_code == 200
    name = field
    q, _, rest = field.partition("_")
    if q in ("alpha", "beta"):
        name = f"q{week[q].pk}_{rest}"
    errors = page.context["form"].errors
    assert name in errors, errors
    assert any(words in e for e in errors[name]), errors[name]
    assert words in page.content.decode().replace("&#x27;", "'")
    # What was typed stays in the form.
    for key, value in data.items():
        if key.startswith("q") and value not in ("abc",):
            assert f'value="{value}"' in page.content.decode() or key not in page.context["form"].fields
    assert PlanRun.objects.count() == 0 and sent == []


def test_a_plan_that_changes_nothing_is_refused(
    admin_client: Client, week: dict[str, Any], sent: list[int]
) -> None:
    page = admin_client.post("/planner/", _form(week))
    assert "Nothing changes: set another GPU quota" in page.content.decode()
    assert PlanRun.objects.count() == 0 and sent == []


def test_too_many_jobs_in_the_window_are_refused(
    admin_client: Client, week: dict[str, Any], sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kai_portal.planning import forms

    monkeypatch.setattr(forms, "MAX_JOBS", 50)
    page = admin_client.post("/planner/", _form(week, alpha_gpu_quota=12))
    errors = page.context["form"].errors["window_start"]
    assert errors == [f"Window start: the window holds {week['jobs']} jobs; a plan replays at most 50. "
                      "Choose a shorter window."]  # fmt: skip
    assert PlanRun.objects.count() == 0


def test_an_admin_runs_a_plan_in_the_worker_and_reads_its_results_and_csv(
    admin_client: Client, portal_admin: Any, week: dict[str, Any], sent: list[int],
    django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/planner/",
            _form(week, alpha_gpu_quota=12, beta_gpu_quota=4, extra_count=1, extra_pool="default"),
        )
    plan = PlanRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/planner/{plan.pk}/"
    # Stored and sent to the worker; nothing ran in the request.
    assert sent == [plan.pk] and plan.status == PlanRun.Status.QUEUED and plan.outputs == {}
    assert plan.created_by == portal_admin
    assert plan.inputs["queue_changes"] == {"alpha": {"gpu_quota": 12.0}, "beta": {"gpu_quota": 4.0}}
    assert plan.inputs["extra_nodes"]["count"] == 1 and plan.inputs["extra_nodes"]["pool"] == "default"
    entry = AuditEntry.objects.get(content_type__app_label="planning")
    assert entry.action == "create" and entry.actor == portal_admin and entry.object_id == str(plan.pk)

    waiting = admin_client.get(f"/planner/{plan.pk}/")
    assert 'data-testid="plan-progress"' in waiting.content.decode()
    assert "Waiting for the worker" in waiting.content.decode()
    assert admin_client.get(f"/planner/{plan.pk}/plan.csv").status_code == 404  # no results yet
    assert "HX-Refresh" not in admin_client.get(f"/planner/{plan.pk}/progress/")

    tasks.run_plan(plan.pk)
    status = admin_client.get(f"/planner/{plan.pk}/status.json").json()
    assert status["status"] == "succeeded" and status["progress"] == 100
    assert admin_client.get(f"/planner/{plan.pk}/progress/")["HX-Refresh"] == "true"

    page = admin_client.get(f"/planner/{plan.pk}/")
    html = page.content.decode()
    assert html.count('<svg class="plan-chart" role="img"') == 3
    teams = {t["name"]: t for t in page.context["teams"]}
    out = status["outputs"]
    assert teams["Alpha"]["today"]["median_wait_min"] == round(
        out["today"]["teams"]["Alpha"]["median_wait_s"] / 60, 1
    )
    assert 'data-team="Alpha"' in html and "Download CSV" in html
    assert (
        out["changed"]["cluster"]["capacity_gpu"] == 24.0 and out["today"]["cluster"]["capacity_gpu"] == 16.0
    )

    download = admin_client.get(f"/planner/{plan.pk}/plan.csv")
    assert download["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(download.content.decode())))
    alpha = {r["setting"]: r for r in rows if r["level"] == "queue" and r["name"] == "alpha"}
    assert float(alpha["today"]["median_wait_min"]) == round(
        out["today"]["queues"]["alpha"]["median_wait_s"] / 60, 1
    )
    assert float(alpha["changed"]["gpu_hours"]) == out["changed"]["queues"]["alpha"]["gpu_hours"]
    assert {r["level"] for r in rows} == {"team", "queue", "cluster"}

    listing = admin_client.get("/planner/").content.decode()
    assert f'href="/planner/{plan.pk}/"' in listing and "Succeeded" in listing


def test_a_plan_taken_by_another_worker_is_not_run_twice(week: dict[str, Any]) -> None:
    plan = PlanRun.objects.create(inputs={}, status=PlanRun.Status.RUNNING)
    tasks.run_plan(plan.pk)
    plan.refresh_from_db()
    assert plan.status == PlanRun.Status.RUNNING and plan.outputs == {}


def test_a_failing_plan_says_why_on_its_page(admin_client: Client, week: dict[str, Any]) -> None:
    plan = PlanRun.objects.create(inputs={"start": "yesterday"})
    tasks.run_plan(plan.pk)
    plan.refresh_from_db()
    assert plan.status == PlanRun.Status.FAILED and "yesterday" in plan.error
    html = admin_client.get(f"/planner/{plan.pk}/").content.decode()
    assert "The plan failed:" in html and "yesterday" in html
