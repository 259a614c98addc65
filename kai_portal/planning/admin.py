from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from kai_portal.planning.models import PlanRun


@admin.register(PlanRun)
class PlanRunAdmin(admin.ModelAdmin):
    """Capacity plans: made from the planner page (which validates and queues them), so viewable
    here and deletable, never added or edited (an edited input would not match its outputs)."""

    list_display = ["id", "created_by", "created_at", "status", "progress"]
    list_filter = ["status"]
    search_fields = ["stage", "error"]
    list_select_related = ["created_by"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
