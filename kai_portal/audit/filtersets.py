"""Filters for the audit log, shared by the audit page and the REST API."""

from __future__ import annotations

import django_filters

from kai_portal.audit.models import AuditEntry
from kai_portal.core.filters import UtcIsoDateTimeFilter


class AuditEntryFilterSet(django_filters.FilterSet):
    """``?model=queue&object_id=3&actor=alice&action=update&since=...&until=...``."""

    model = django_filters.ChoiceFilter(
        field_name="content_type__model",
        choices=[("team", "Team"), ("membership", "Membership"), ("queue", "Queue")],
    )
    object_id = django_filters.CharFilter()
    actor = django_filters.CharFilter(field_name="actor_name", label="Actor (username)")
    action = django_filters.ChoiceFilter(choices=AuditEntry.Action.choices)
    source = django_filters.CharFilter()
    since = UtcIsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcIsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEntry
        fields = ["model", "object_id", "actor", "action", "source", "since", "until"]
