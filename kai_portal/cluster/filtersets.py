"""Filters for node and GPU lists, shared by the list pages and the REST API."""

from __future__ import annotations

import django_filters

from kai_portal.nodes.models import GpuDevice, Node


class NodeFilterSet(django_filters.FilterSet):
    """``?pool=a100&schedulable=true&ready=true&name=node``."""

    pool = django_filters.CharFilter(field_name="pool__name", label="Node pool")
    schedulable = django_filters.BooleanFilter()
    ready = django_filters.BooleanFilter()
    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")

    class Meta:
        model = Node
        fields = ["pool", "schedulable", "ready", "name"]


class GpuDeviceFilterSet(django_filters.FilterSet):
    """``?node=node-1&pool=a100&model=A100``."""

    node = django_filters.CharFilter(field_name="node__name", label="Node")
    pool = django_filters.CharFilter(field_name="node__pool__name", label="Node pool")
    model = django_filters.CharFilter(lookup_expr="icontains", label="Model contains")

    class Meta:
        model = GpuDevice
        fields = ["node", "pool", "model"]
