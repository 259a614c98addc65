"""The audit log page: every change to teams, memberships and queues, for portal admins."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from kai_portal.audit.models import AuditEntry
from kai_portal.core import units
from kai_portal.core.htmx import page_or_fragment

PAGE_SIZE = 50


def _changes(entry: AuditEntry) -> list[dict[str, Any]]:
    before, after = entry.before or {}, entry.after or {}
    return [
        {"field": f, "before": units.plain_number(before.get(f)), "after": units.plain_number(after.get(f))}
        for f in entry.changed_fields()
    ]


@login_required
def entry_list(request: HttpRequest) -> HttpResponse:
    """Newest first; filter by model, one queue (``?queue=<id>``) or actor."""
    if not getattr(request.user, "is_portal_admin", False):
        raise PermissionDenied("The audit log is for portal admins.")
    entries = AuditEntry.objects.select_related("content_type").order_by("-at", "-id")
    model = request.GET.get("model", "")
    if model in {"queue", "team", "membership"}:
        entries = entries.filter(content_type__model=model)
    if request.GET.get("queue", "").isdigit():
        entries = entries.filter(
            content_type=ContentType.objects.get_by_natural_key("queues", "queue"),
            object_id=request.GET["queue"],
        )
    actor = request.GET.get("actor", "").strip()
    if actor:
        entries = entries.filter(actor_name__iexact=actor)
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"entry": e, "changes": _changes(e)} for e in page.object_list]
    query = request.GET.copy()
    query.pop("page", None)
    context = {"page": page, "rows": rows, "model": model, "actor": actor, "query": query.urlencode()}
    return render(
        request, page_or_fragment(request, "audit/entry_list.html", "partials/audit/_table.html"), context
    )
