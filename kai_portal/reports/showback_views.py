"""Showback page and CSV: GPU-hours per team and queue over a chosen window (the queues the user
may see), and idle allocated GPUs now. Numbers: ``reports/showback.py``."""

from __future__ import annotations

import csv
from datetime import datetime, time, timedelta
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from kai_portal.monitoring.gpu_use import showback_gpu_use
from kai_portal.queues.models import Queue
from kai_portal.reports.showback import idle_allocated, showback

PRESETS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
MAX_WINDOW = timedelta(days=400)


class WindowForm(forms.Form):
    preset = forms.ChoiceField(choices=[(k, f"last {k}") for k in PRESETS] + [("custom", "dates below")],
                               required=False)  # fmt: skip
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="From")
    until = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), label="To (inclusive)"
    )

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        data = self.cleaned_data if self.is_valid() else {}
        since, until = data.get("since"), data.get("until")
        if data.get("preset") == "custom" or (since and not data.get("preset")):
            tz = timezone.get_current_timezone()
            end = datetime.combine(until, time.min, tz) + timedelta(days=1) if until else now
            start = datetime.combine(since, time.min, tz) if since else end - PRESETS["7d"]
            start = max(start, end - MAX_WINDOW)
            return (start, end) if start < end else (end - timedelta(days=1), end)
        return now - PRESETS.get(data.get("preset") or "7d", PRESETS["7d"]), now


def _context(request: HttpRequest) -> dict[str, Any]:
    form = WindowForm(request.GET or None, initial={"preset": "7d"})
    since, until = form.window(timezone.now())
    queue_ids = list(Queue.objects.visible_to(request.user).values_list("pk", flat=True))
    return {"form": form, "report": showback(queue_ids, since, until), "idle": idle_allocated(queue_ids),
            "queue_ids": queue_ids}  # fmt: skip


@login_required
def showback_page(request: HttpRequest) -> HttpResponse:
    context = _context(request)
    report = context["report"]
    fmt = "%d %b %H:00" if report.until - report.since <= timedelta(days=2) else "%d %b"
    context["chart"] = {
        "labels": [timezone.localtime(b).strftime(fmt) for b in report.buckets],
        "series": report.series,
    }
    context["query"] = request.GET.urlencode()
    # DCGM utilisation as stored by the worker (None while PROMETHEUS_URL is unset: nothing shown).
    gpu_use = showback_gpu_use(context["queue_ids"], [(q.queue, q.team, q.gpu_hours) for q in report.queues])
    if gpu_use is not None:
        context["gpu_use"] = gpu_use
        context["gpu_use_tables"] = [("Per team", gpu_use.teams, "gpu-use-teams"),
                                     ("Per queue", gpu_use.queues, "gpu-use-queues")]  # fmt: skip
    return render(request, "reports/showback.html", context)


@login_required
def showback_csv(request: HttpRequest) -> HttpResponse:
    """GPU-hours per queue per hour (windows up to 2 days) or day, for the same window as the page."""
    report = _context(request)["report"]
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="showback.csv"'
    writer = csv.writer(response)
    writer.writerow(["period_start", "team", "queue", "gpu_hours"])
    for bucket, team, queue, hours in report.by_bucket:
        writer.writerow([bucket.isoformat(), team, queue, hours])
    return response
