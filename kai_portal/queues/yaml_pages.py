"""Queue YAML pages: one queue as YAML, and the import page for portal admins: paste or upload
``scheduling.run.ai/v2`` Queue documents, preview what would change, apply. The import itself is
``kai_yaml.import_queues`` (all or nothing, audit-logged as the signed-in admin through the audit middleware).

The preview runs the real import inside a transaction that is rolled back, and shows the audit
entries it would have written: what "apply" will do, checked by the same rules, nothing kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from kai_portal.audit.models import AuditEntry
from kai_portal.core import units
from kai_portal.core.access import get_visible_or_404
from kai_portal.core.write_throttle import throttle_writes
from kai_portal.queues import cluster_writes
from kai_portal.queues.kai_yaml import ImportResult, QueueYamlError, export_queues, import_queues
from kai_portal.queues.models import Queue

MAX_UPLOAD_BYTES = 1_000_000
IGNORED_FIELDS = {"id", "updated_at", "created_at"}


class QueueImportForm(forms.Form):
    text = forms.CharField(
        label="Queue YAML",
        required=False,
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false", "class": "code"}),
        help_text="One or more scheduling.run.ai/v2 Queue documents separated by ---.",
    )
    upload = forms.FileField(label="…or upload a file", required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("upload")
        if upload is not None:
            if upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError(f"The file is larger than {MAX_UPLOAD_BYTES // 1000} kB.")
            try:
                data["text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        if not (data.get("text") or "").strip():
            raise forms.ValidationError("Paste Queue YAML or choose a file.")
        return data


@dataclass
class PlannedChange:
    queue: str
    action: str  # create | update
    changes: list[tuple[str, Any, Any]] = field(default_factory=list)


class _Rollback(Exception):
    pass


def preview(text: str) -> tuple[ImportResult, list[PlannedChange]]:
    """What importing ``text`` would do, from the audit entries of an import that is rolled back."""
    planned: list[PlannedChange] = []
    result = ImportResult()
    try:
        with transaction.atomic():
            newest = AuditEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
            result = import_queues(text)
            for entry in AuditEntry.objects.filter(pk__gt=newest, content_type__model="queue").order_by("pk"):
                before, after = entry.before or {}, entry.after or {}
                changes = [
                    (key, units.plain_number(before.get(key)), units.plain_number(value))
                    for key, value in after.items()
                    if key not in IGNORED_FIELDS and before.get(key) != value
                ]
                planned.append(PlannedChange(queue=entry.object_repr, action=entry.action, changes=changes))
            raise _Rollback
    except _Rollback:
        pass
    return result, planned


@login_required
@require_http_methods(["GET", "POST"])
@throttle_writes
def queue_import(request: HttpRequest) -> HttpResponse:
    """Portal admins only (403 otherwise). ``preview`` first; ``apply`` imports and audit-logs."""
    if not getattr(request.user, "is_portal_admin", False):
        raise PermissionDenied("Only portal admins import queues.")
    form = QueueImportForm(request.POST or None, request.FILES or None)
    context: dict[str, Any] = {"form": form, "error": None, "planned": None, "text": ""}
    if request.method == "POST" and form.is_valid():
        text = form.cleaned_data["text"]
        context["text"] = text
        try:
            if request.POST.get("action") == "apply":
                with transaction.atomic():  # kubernetes mode: the rows and the Queue objects, or nothing
                    result = import_queues(text)
                    cluster_writes.publish_imported(result.created + result.updated)
                messages.success(
                    request,
                    f"Imported {len(result.created)} new and {len(result.updated)} updated queue(s); "
                    "each change is in the audit log.",
                )
                for warning in result.warnings:
                    messages.warning(request, warning)
                return redirect("queues:queue_list")
            result, planned = preview(text)
            context.update(planned=planned, warnings=result.warnings)
        except QueueYamlError as exc:
            context["error"] = exc
            context["error_context"] = _lines_around(text, exc.line)
        except cluster_writes.QueueWriteRefused as refused:
            context["refused"] = str(refused)
            status = 409 if refused.conflict else 503
            return render(request, "queues/queue_import.html", context, status=status)
    return render(request, "queues/queue_import.html", context)


def _lines_around(text: str, line: int | None, span: int = 2) -> list[tuple[int, str, bool]]:
    """The lines near ``line`` (from 1), to show the mistake in place."""
    if line is None:
        return []
    lines = text.splitlines()
    first, last = max(1, line - span), min(len(lines), line + span)
    return [(n, lines[n - 1], n == line) for n in range(first, last + 1)]


@login_required
def queue_yaml(request: HttpRequest, name: str) -> HttpResponse:
    """One queue as KAI ``scheduling.run.ai/v2`` Queue YAML (404 if not visible)."""
    queue = get_visible_or_404(Queue.objects.visible_to(request.user).select_related("parent"), name=name)
    return HttpResponse(export_queues([queue]), content_type="text/plain; charset=utf-8")
