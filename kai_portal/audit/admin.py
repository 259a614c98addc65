from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from kai_portal.audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only: the audit log is evidence, so nobody edits or deletes it here."""

    list_display = ["at", "actor_name", "source", "action", "content_type", "object_repr"]
    list_filter = ["action", "content_type", "source"]
    search_fields = ["actor_name", "object_repr", "object_id"]
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
