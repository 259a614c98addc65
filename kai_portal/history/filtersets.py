"""Filters for scheduling history: cycles, decisions, job messages and usage samples."""

from __future__ import annotations

import django_filters

from kai_portal.core.filters import UtcIsoDateTimeFilter
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle, UsageSample


class CycleFilterSet(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=SchedulingCycle.Status.choices)
    since = UtcIsoDateTimeFilter(field_name="started_at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="started_at", lookup_expr="lt")

    class Meta:
        model = SchedulingCycle
        fields = ["status", "since", "until"]


class DecisionFilterSet(django_filters.FilterSet):
    """``?job=<uid>&cycle=12&kind=unschedulable&reason=OverLimit&queue=ml-train``."""

    job = django_filters.UUIDFilter(field_name="job__uid", label="Job uid")
    queue = django_filters.CharFilter(field_name="job__queue__name", label="Queue of the job")
    cycle = django_filters.NumberFilter(field_name="cycle_id", label="Cycle id")
    kind = django_filters.MultipleChoiceFilter(choices=Decision.Kind.choices)
    action = django_filters.ChoiceFilter(choices=Decision.Action.choices)
    reason = django_filters.CharFilter(label="KAI reason code")

    class Meta:
        model = Decision
        fields = ["job", "queue", "cycle", "kind", "action", "reason"]


class JobMessageFilterSet(django_filters.FilterSet):
    job = django_filters.UUIDFilter(field_name="job__uid", label="Job uid")
    cycle = django_filters.NumberFilter(field_name="cycle_id", label="Cycle id")
    reason = django_filters.CharFilter()

    class Meta:
        model = JobMessage
        fields = ["job", "cycle", "reason"]


class UsageSampleFilterSet(django_filters.FilterSet):
    """A time window of one queue's usage: ``?resource=gpu&since=...&until=...`` (ISO 8601)."""

    resource = django_filters.ChoiceFilter(choices=UsageSample.Resource.choices)
    since = UtcIsoDateTimeFilter(field_name="sampled_at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="sampled_at", lookup_expr="lt")

    class Meta:
        model = UsageSample
        fields = ["resource", "since", "until"]
