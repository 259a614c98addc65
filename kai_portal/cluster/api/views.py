"""Nodes, GPU devices and node pools: read-only for everyone signed in.

The cluster backend owns these rows (it observes the cluster), so the API never writes them.
"""

from __future__ import annotations

from django.db.models import Count, QuerySet
from rest_framework import viewsets

from kai_portal.cluster.api.serializers import GpuDeviceSerializer, NodePoolSerializer, NodeSerializer
from kai_portal.cluster.filtersets import GpuDeviceFilterSet, NodeFilterSet
from kai_portal.nodes.models import GpuDevice, Node, NodePool


class NodePoolViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = NodePoolSerializer
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    ordering_fields = ["name"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[NodePool]:
        return NodePool.objects.annotate(node_count=Count("nodes"))


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    ordering_fields = ["name", "cpu_millicores", "memory_mib", "created_at", "updated_at"]
    ordering = ["pool__name", "name"]

    def get_queryset(self) -> QuerySet[Node]:
        return Node.objects.select_related("pool").prefetch_related("gpus")


class GpuDeviceViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = GpuDeviceSerializer
    filterset_class = GpuDeviceFilterSet
    ordering_fields = ["index", "model", "memory_mib", "node__name"]
    ordering = ["node__name", "index"]

    def get_queryset(self) -> QuerySet[GpuDevice]:
        return GpuDevice.objects.select_related("node__pool")
