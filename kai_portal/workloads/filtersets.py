"""Filters for job and pod lists, shared by the list pages and the REST API."""

from __future__ import annotations

import django_filters

from kai_portal.core.filters import UtcIsoDateTimeFilter
from kai_portal.workloads.choices import JobState, PodState, PriorityClass
from kai_portal.workloads.models import Job, Pod


class JobFilterSet(django_filters.FilterSet):
    """``?team=ml&queue=ml-train&state=pending&state=running&submitter=alice&node_pool=a100``.

    Filters narrow a queryset that already went through ``Job.objects.visible_to``;
    they never widen what a user may see.
    """

    team = django_filters.CharFilter(field_name="queue__team__slug", label="Team (slug)")
    queue = django_filters.CharFilter(field_name="queue__name", label="Queue")
    # distinct=False: a filter on the job's own column cannot repeat rows (the default adds DISTINCT).
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices, distinct=False)
    submitter = django_filters.CharFilter(field_name="submitter__username", label="Submitter (username)")
    node_pool = django_filters.CharFilter(field_name="node_pool__name", label="Node pool")
    priority_class = django_filters.ChoiceFilter(choices=PriorityClass.choices)
    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")
    created_after = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Job
        fields = ["team", "queue", "state", "submitter", "node_pool", "priority_class", "name"]


class PodFilterSet(django_filters.FilterSet):
    """``?job=<uid>&state=pending&node=node-1&queue=ml-train``."""

    job = django_filters.UUIDFilter(field_name="job__uid", label="Job uid")
    queue = django_filters.CharFilter(field_name="job__queue__name", label="Queue")
    state = django_filters.MultipleChoiceFilter(choices=PodState.choices, distinct=False)
    node = django_filters.CharFilter(field_name="node__name", label="Node")

    class Meta:
        model = Pod
        fields = ["job", "queue", "state", "node"]
