"""Filters for team and membership lists, shared by the list pages and the REST API."""

from __future__ import annotations

import django_filters

from kai_portal.teams.models import Membership, Team


class TeamFilterSet(django_filters.FilterSet):
    """``?name=vision&member=alice``."""

    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")
    member = django_filters.CharFilter(field_name="memberships__user__username", label="Member (username)")

    class Meta:
        model = Team
        fields = ["name", "member"]


class MembershipFilterSet(django_filters.FilterSet):
    """``?team=ml&user=alice&role=admin``."""

    team = django_filters.CharFilter(field_name="team__slug", label="Team (slug)")
    user = django_filters.CharFilter(field_name="user__username", label="User (username)")
    role = django_filters.ChoiceFilter(choices=Membership.Role.choices)

    class Meta:
        model = Membership
        fields = ["team", "user", "role"]
