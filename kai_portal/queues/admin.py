from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from kai_portal.queues.models import Queue

QUOTA_FIELDS = [
    f"{resource}_{kind}"
    for resource in ("gpu", "cpu", "memory")
    for kind in ("quota", "limit", "over_quota_weight")
]


class ChildQueueInline(admin.TabularInline):
    """The children of a queue with their quotas: split a department's quota in one page."""

    model = Queue
    fk_name = "parent"
    verbose_name = "child queue"
    verbose_name_plural = "child queues and their quotas"
    extra = 0
    fields = ["name", "team", "priority", *QUOTA_FIELDS]
    show_change_link = True


class LeafFilter(admin.SimpleListFilter):
    title = "position in tree"
    parameter_name = "position"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("top", "Department (top level)"), ("leaf", "Leaf (receives jobs)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Queue]) -> QuerySet[Queue]:
        if self.value() == "top":
            return queryset.filter(parent__isnull=True)
        if self.value() == "leaf":
            return queryset.filter(children__isnull=True)
        return queryset


@admin.register(Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = [
        "name", "parent", "team", "priority",
        "gpu_quota", "gpu_limit", "gpu_over_quota_weight", "cpu_quota", "memory_quota",
    ]  # fmt: skip
    list_filter = [LeafFilter, "team", "parent", "priority"]
    search_fields = ["name", "display_name", "team__name", "parent__name"]
    autocomplete_fields = ["parent", "team"]
    list_select_related = ["parent", "team"]
    inlines = [ChildQueueInline]
    fieldsets = [
        (None, {"fields": ["name", "display_name", "parent", "team", "priority"]}),
        ("GPU (devices; -1 = unlimited)", {"fields": [("gpu_quota", "gpu_limit", "gpu_over_quota_weight")]}),
        (
            "CPU (millicores; -1 = unlimited)",
            {"fields": [("cpu_quota", "cpu_limit", "cpu_over_quota_weight")]},
        ),
        (
            "Memory (MiB; -1 = unlimited)",
            {"fields": [("memory_quota", "memory_limit", "memory_over_quota_weight")]},
        ),
        ("Minimum runtimes (empty = inherit)", {"fields": ["preempt_min_runtime", "reclaim_min_runtime"]}),
    ]
