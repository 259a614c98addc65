"""Scheduling pages: the fairness audit for portal admins."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from kai_portal.reports import fairness_audit


@login_required
def fairness_audit_page(request: HttpRequest) -> HttpResponse:
    """Starved and borrowing queues, idle quota and blocked gangs, with evidence and a suggested action."""
    if not getattr(request.user, "is_portal_admin", False):
        raise PermissionDenied("The fairness audit is for portal admins.")
    now = timezone.now()
    findings = fairness_audit.audit(now)
    context = {
        "findings": findings,
        "now": now,
        "thresholds": fairness_audit.thresholds(),
        "counts": {
            label: sum(1 for f in findings if f.kind == kind)
            for kind, label in fairness_audit.KIND_LABELS.items()
        },
        "section": "fairness",
    }
    return render(request, "reports/fairness_audit.html", context)
