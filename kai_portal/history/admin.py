from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from kai_portal.history.models import (
    CycleFence,
    Decision,
    JobForecast,
    JobMessage,
    QueueStatus,
    SchedulingCycle,
    UsageSample,
)
from kai_portal.nodes.models import PoolUsageSample


class HistoryAdmin(admin.ModelAdmin):
    """History written by the scheduling loop: viewable, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SchedulingCycle)
class SchedulingCycleAdmin(HistoryAdmin):
    list_display = [
        "id", "started_at", "status", "duration_ms", "allocated_count", "pipelined_count",
        "evicted_count", "unschedulable_count",
    ]  # fmt: skip
    list_filter = ["status"]
    date_hierarchy = "started_at"
    search_fields = ["error"]


@admin.register(CycleFence)
class CycleFenceAdmin(HistoryAdmin):
    """Fencing tokens (scheduling/fencing.py): an edit by hand could let a stale cycle commit."""

    list_display = ["name", "token", "holder", "taken_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Decision)
class DecisionAdmin(HistoryAdmin):
    list_display = ["cycle", "pod_name", "job", "kind", "action", "node", "reason", "evictor_job"]
    list_filter = ["kind", "action", "reason"]
    search_fields = ["pod_name", "job__name", "message", "node__name"]
    list_select_related = ["cycle", "job", "node", "evictor_job"]


@admin.register(JobMessage)
class JobMessageAdmin(HistoryAdmin):
    list_display = ["cycle", "job", "reason", "message"]
    list_filter = ["reason"]
    search_fields = ["job__name", "message"]
    list_select_related = ["cycle", "job"]


@admin.register(UsageSample)
class UsageSampleAdmin(HistoryAdmin):
    list_display = ["queue", "resource", "sampled_at", "allocated", "requested", "deserved", "fair_share"]
    list_filter = ["resource", "queue"]
    search_fields = ["queue__name"]
    date_hierarchy = "sampled_at"
    list_select_related = ["queue"]


@admin.register(PoolUsageSample)
class PoolUsageSampleAdmin(HistoryAdmin):
    list_display = ["pool", "sampled_at", "gpus_allocated", "gpus_requested", "gpus_total"]
    list_filter = ["pool"]
    date_hierarchy = "sampled_at"
    list_select_related = ["pool"]


@admin.register(JobForecast)
class JobForecastAdmin(HistoryAdmin):
    list_display = [
        "job", "pool", "queue_position", "cluster_position", "estimated_start", "unknown", "computed_at",
    ]  # fmt: skip
    list_filter = ["pool", "unknown"]
    search_fields = ["job__name"]
    list_select_related = ["job"]


@admin.register(QueueStatus)
class QueueStatusAdmin(HistoryAdmin):
    list_display = [
        "queue", "resource", "deserved", "fair_share", "allocated", "requested", "limit", "updated_at",
    ]  # fmt: skip
    list_filter = ["resource"]
    search_fields = ["queue__name"]
    list_select_related = ["queue"]
