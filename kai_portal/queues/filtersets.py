"""Filters for queue lists, shared by the list page and the REST API."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from kai_portal.queues.models import Queue


class QueueFilterSet(django_filters.FilterSet):
    """``?team=ml&parent=research&leaf=true&name=train``; ``parent=`` (empty) is not a filter,
    use ``top=true`` for departments."""

    team = django_filters.CharFilter(field_name="team__slug", label="Team (slug)")
    parent = django_filters.CharFilter(field_name="parent__name", label="Parent queue")
    top = django_filters.BooleanFilter(field_name="parent", lookup_expr="isnull", label="Top-level only")
    leaf = django_filters.BooleanFilter(method="filter_leaf", label="Leaf queues only")
    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")

    class Meta:
        model = Queue
        fields = ["team", "parent", "top", "leaf", "name"]

    def filter_leaf(self, queryset: QuerySet[Queue], name: str, value: bool | None) -> QuerySet[Queue]:
        if value is None:
            return queryset
        return queryset.filter(children__isnull=value).distinct()
