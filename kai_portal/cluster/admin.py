from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from kai_portal.cluster import operations
from kai_portal.nodes.models import GpuDevice, Node, NodePool


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    fields = ["name", "cpu_millicores", "memory_mib", "schedulable", "ready"]
    show_change_link = True


class GpuDeviceInline(admin.TabularInline):
    model = GpuDevice
    extra = 0
    fields = ["index", "model", "memory_mib"]


@admin.register(NodePool)
class NodePoolAdmin(admin.ModelAdmin):
    list_display = ["name", "gpu_sharing", "node_count"]
    list_filter = ["gpu_sharing"]
    search_fields = ["name", "description"]
    inlines = [NodeInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[NodePool]:
        return super().get_queryset(request).annotate(_node_count=Count("nodes"))

    @admin.display(description="nodes", ordering="_node_count")
    def node_count(self, obj: NodePool) -> int:
        return obj._node_count  # type: ignore[attr-defined,no-any-return]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "pool", "gpu_count", "cpu_millicores", "memory_mib", "schedulable", "ready"]
    list_filter = ["pool", "schedulable", "ready", "gpus__model"]
    search_fields = ["name", "gpus__model"]
    list_select_related = ["pool"]
    inlines = [GpuDeviceInline]
    actions = ["cordon", "uncordon", "remove"]

    @admin.action(description="Cordon: keep running pods, schedule nothing new")
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        done = sum(operations.cordon_node(node) for node in queryset)
        self.message_user(request, f"Cordoned {done} node(s).", messages.SUCCESS)

    @admin.action(description="Uncordon: take new pods again")
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        done = sum(operations.uncordon_node(node) for node in queryset)
        self.message_user(request, f"Uncordoned {done} node(s).", messages.SUCCESS)

    @admin.action(description="Remove: drain (pods go back to pending) and delete")
    def remove(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        nodes = list(queryset)
        moved = sum(operations.remove_node(node) for node in nodes)
        text = f"Removed {len(nodes)} node(s); {moved} pod(s) went back to pending or failed."
        self.message_user(request, text, messages.SUCCESS)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return super().get_queryset(request).annotate(_gpu_count=Count("gpus")).distinct()

    @admin.display(description="GPUs", ordering="_gpu_count")
    def gpu_count(self, obj: Node) -> int:
        return obj._gpu_count  # type: ignore[attr-defined,no-any-return]


@admin.register(GpuDevice)
class GpuDeviceAdmin(admin.ModelAdmin):
    list_display = ["__str__", "node", "index", "model", "memory_mib"]
    list_filter = ["model", "node__pool"]
    search_fields = ["node__name", "model"]
    list_select_related = ["node"]
