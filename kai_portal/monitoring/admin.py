from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from kai_portal.monitoring.models import GpuUseRead, JobGpuUse, MetricTotal


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


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the worker writes from Prometheus: viewable; the next read replaces them anyway."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(JobGpuUse)
class JobGpuUseAdmin(ReadOnlyAdmin):
    list_display = ["job", "read_at", "gpus_seen", "idle_gpus_seen", "mean_utilisation", "memory_used_mib"]
    list_select_related = ["job"]
    search_fields = ["job__name"]


@admin.register(GpuUseRead)
class GpuUseReadAdmin(ReadOnlyAdmin):
    list_display = ["attempted_at", "outcome", "series", "jobs", "truncated"]
    list_filter = ["outcome"]
    search_fields = ["message"]
