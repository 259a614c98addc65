"""Capacity planner pages (portal admins only): the plan form and the list of plans, one plan's
progress (polled by htmx from the stored row) and results, its CSV, and its status as JSON.

A request only validates, stores the plan and sends it to the worker (``tasks.enqueue``); the
replays run in the Celery worker."""

from __future__ import annotations

import csv
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from kai_portal.audit.recording import record, snapshot
from kai_portal.planning.charts import paired_bars
from kai_portal.planning.forms import PlanForm
from kai_portal.planning.models import PlanRun
from kai_portal.planning.tasks import enqueue

SETTINGS = ("today", "changed")
CSV_COLUMNS = ("level", "name", "team", "setting", "jobs", "started", "never_started", "median_wait_min",
               "p95_wait_min", "gpu_hours", "utilisation", "evictions")  # fmt: skip


def _admin_only(request: HttpRequest) -> None:
    if not getattr(request.user, "is_portal_admin", False):
        raise PermissionDenied("The capacity planner is for portal admins.")


@login_required
@require_http_methods(["GET", "POST"])
def planner(request: HttpRequest) -> HttpResponse:
    _admin_only(request)
    now = timezone.now()
    form = PlanForm(request.POST or None, now=now)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            admin = cast(Any, request.user)
            plan = PlanRun.objects.create(created_by=admin, inputs=form.plan_inputs().to_json())
            record(plan, "create", None, snapshot(plan))
            enqueue(plan)
        return redirect("planning:plan_detail", pk=plan.pk)
    runs = PlanRun.objects.select_related("created_by")[:50]
    return render(request, "planning/planner.html", {"form": form, "runs": runs})


@login_required
def plan_detail(request: HttpRequest, pk: int) -> HttpResponse:
    _admin_only(request)
    plan = get_object_or_404(PlanRun, pk=pk)
    return render(request, "planning/plan_detail.html", {"plan": plan, **_results(plan)})


@login_required
def plan_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress box, polled while the plan runs; once it is done the page reloads to the results."""
    _admin_only(request)
    plan = get_object_or_404(PlanRun, pk=pk)
    response = render(request, "partials/planning/_progress.html", {"plan": plan})
    if plan.done:
        response["HX-Refresh"] = "true"
    return response


@login_required
def plan_status(request: HttpRequest, pk: int) -> JsonResponse:
    _admin_only(request)
    plan = get_object_or_404(PlanRun, pk=pk)
    return JsonResponse(
        {"id": plan.pk, "status": plan.status, "progress": plan.progress, "stage": plan.stage,
         "error": plan.error, "inputs": plan.inputs, "outputs": plan.outputs if plan.done else None}
    )  # fmt: skip


@login_required
def plan_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """Per team, per queue and for the cluster: both settings, one row each."""
    _admin_only(request)
    plan = get_object_or_404(PlanRun, pk=pk, status=PlanRun.Status.SUCCEEDED)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="capacity-plan-{plan.pk}.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    out = plan.outputs
    for setting in SETTINGS:
        for team, row in out[setting]["teams"].items():
            writer.writerow(_csv_row("team", team, team, setting, row))
        for queue, row in out[setting]["queues"].items():
            writer.writerow(_csv_row("queue", queue, row["team"], setting, row))
        c = out[setting]["cluster"]
        writer.writerow(["cluster", "all", "", setting, out["jobs"], "", "", "", "", c["gpu_hours"],
                         c["utilisation"], c["evictions"]])  # fmt: skip
    return response


def _csv_row(level: str, name: str, team: str, setting: str, row: dict[str, Any]) -> list[Any]:
    return [level, name, team, setting, row["jobs"], row["started"], row["never_started"],
            _minutes(row["median_wait_s"]), _minutes(row["p95_wait_s"]), row["gpu_hours"],
            row.get("utilisation", ""), row["evictions"]]  # fmt: skip


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60.0, 1)


def _results(plan: PlanRun) -> dict[str, Any]:
    """Rows of both settings side by side, and the charts, for a plan that succeeded."""
    if plan.status != PlanRun.Status.SUCCEEDED:
        return {}
    out = plan.outputs
    today, changed = out["today"], out["changed"]

    def pairs(level: str) -> list[dict[str, Any]]:
        names = sorted(set(today[level]) | set(changed[level]))
        return [{"name": n, "today": _shown(today[level].get(n)), "changed": _shown(changed[level].get(n))}
                for n in names]  # fmt: skip

    teams = pairs("teams")

    def chart(title: str, unit: str, key: str) -> Any:
        return paired_bars(title, unit, [(t["name"], t["today"][key], t["changed"][key]) for t in teams])

    charts = [
        chart("Median wait per team, minutes", "min", "median_wait_min"),
        chart("95th percentile wait per team, minutes", "min", "p95_wait_min"),
        chart("GPU-hours served per team", "GPU-h", "gpu_hours"),
    ]
    return {
        "teams": teams,
        "queues": pairs("queues"),
        "cluster": {"today": today["cluster"], "changed": changed["cluster"]},
        "charts": charts,
    }


def _shown(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"jobs": 0, "started": 0, "never_started": 0, "median_wait_min": None, "p95_wait_min": None,
                "gpu_hours": 0.0, "utilisation": None, "evictions": 0, "team": ""}  # fmt: skip
    shown = dict(row)
    shown["median_wait_min"] = _minutes(row["median_wait_s"])
    shown["p95_wait_min"] = _minutes(row["p95_wait_s"])
    if row.get("utilisation") is not None:
        shown["utilisation_pct"] = round(100 * row["utilisation"], 1)
    return shown
