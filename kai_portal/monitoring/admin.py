from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from kai_portal.monitoring.models import MetricTotal


@admin.register(MetricTotal)
class MetricTotalAdmin(admin.ModelAdmin):
    """The running totals behind /metrics: viewable; editing one would break a Prometheus counter."""

    list_display = ["name", "labels", "value"]
    list_filter = ["name"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
