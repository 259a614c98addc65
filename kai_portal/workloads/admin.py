from __future__ import annotations

from django.contrib import admin

from kai_portal.workloads.models import Job, Pod


class PodInline(admin.TabularInline):
    model = Pod
    extra = 0
    fields = ["index", "name", "state", "node", "started_at", "finished_at", "reason"]
    readonly_fields = ["reason"]
    show_change_link = True


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "name", "queue", "state", "task_count", "min_member", "gpu_count", "gpu_fraction",
        "gpu_memory_mib", "priority_class", "submitter", "created_at",
    ]  # fmt: skip
    list_filter = ["state", "priority_class", "preemptibility", "node_pool", "queue"]
    search_fields = ["name", "uid", "queue__name", "submitter__username", "image"]
    list_select_related = ["queue", "submitter"]
    autocomplete_fields = ["queue", "submitter"]
    readonly_fields = ["uid", "created_at", "updated_at"]
    date_hierarchy = "created_at"
    inlines = [PodInline]
    fieldsets = [
        (None, {"fields": ["uid", "name", "queue", "submitter", "node_pool", "state", "message"]}),
        ("Priority", {"fields": ["priority_class", "priority", "preemptibility"]}),
        ("Gang", {"fields": ["task_count", "min_member"]}),
        (
            "Per-task request",
            {
                "fields": [
                    "gpu_count",
                    ("gpu_fraction", "gpu_memory_mib", "gpu_fraction_devices"),
                    "cpu_millicores",
                    "memory_mib",
                ]
            },
        ),  # fmt: skip
        ("Workload", {"fields": ["image", "command", "duration"]}),
        ("Times", {"fields": ["created_at", "updated_at", "started_at", "finished_at", "last_evicted_at"]}),
    ]


@admin.register(Pod)
class PodAdmin(admin.ModelAdmin):
    list_display = ["name", "job", "state", "node", "started_at", "finished_at"]
    list_filter = ["state", "node__pool"]
    search_fields = ["name", "job__name", "node__name", "reason"]
    list_select_related = ["job", "node"]
    raw_id_fields = ["job", "node"]
    filter_horizontal = ["gpu_devices"]
