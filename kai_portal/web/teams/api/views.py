"""Teams and memberships.

* Teams: everyone signed in lists the teams they belong to (admins: all);
  portal admins create and delete teams and set their pod security level
  (``pod_security``, audited; the team's namespaces' labels follow); team
  admins may rename their team.
* Memberships: visible with their team; team admins and portal admins add,
  change and remove the members of the team.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, QuerySet
from rest_framework import exceptions, viewsets
from rest_framework.serializers import BaseSerializer

from kai_portal.core.api import api_actor
from kai_portal.teams.filtersets import MembershipFilterSet, TeamFilterSet
from kai_portal.teams.models import Membership, Team
from kai_portal.web.teams.api.serializers import MembershipSerializer, TeamSerializer
from kai_portal.web.teams.pod_security import change_level
from kai_portal.workloads.cluster_jobs import ClusterRefused


class TeamViewSet(viewsets.ModelViewSet):
    serializer_class = TeamSerializer
    lookup_field = "slug"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    filterset_class = TeamFilterSet
    ordering_fields = ["slug", "name", "created_at"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Team]:
        # Count over a fresh join: visible_to's own join to memberships is filtered to the caller.
        visible = Team.objects.visible_to(self.request.user).values("pk")
        return (
            Team.objects.filter(pk__in=visible)
            .annotate(member_count=Count("memberships", distinct=True))
            .prefetch_related("queues")
        )

    def perform_create(self, serializer: BaseSerializer) -> None:
        if not self.request.user.is_portal_admin:  # type: ignore[union-attr]
            raise exceptions.PermissionDenied("Only portal admins create teams.")
        with transaction.atomic(), api_actor(self.request):
            team = serializer.save()
        serializer.instance = self.get_queryset().get(pk=team.pk)  # with member_count

    def perform_update(self, serializer: BaseSerializer) -> None:
        self._check_manageable(serializer.instance)
        level = serializer.validated_data.pop("pod_security", None)  # type: ignore[union-attr]
        team: Any = serializer.instance
        if level is not None and level != team.pod_security and not self.request.user.is_portal_admin:  # type: ignore[union-attr]
            raise exceptions.PermissionDenied("Only portal admins change a team's pod security level.")
        try:
            with transaction.atomic(), api_actor(self.request):
                team = serializer.save()
                if level is not None:
                    change_level(team, level)
        except ClusterRefused as exc:
            refused = exceptions.APIException({"pod_security": [exc.message]})
            refused.status_code = exc.status
            raise refused from None
        serializer.instance = self.get_queryset().get(pk=team.pk)

    def perform_destroy(self, instance: Team) -> None:
        if not self.request.user.is_portal_admin:  # type: ignore[union-attr]
            raise exceptions.PermissionDenied("Only portal admins delete teams.")
        with transaction.atomic(), api_actor(self.request):
            instance.delete()

    def _check_manageable(self, team: Any) -> None:
        if not Team.objects.manageable_by(self.request.user).filter(pk=team.pk).exists():
            raise exceptions.PermissionDenied("Only team admins and portal admins change this team.")


class MembershipViewSet(viewsets.ModelViewSet):
    serializer_class = MembershipSerializer
    filterset_class = MembershipFilterSet
    ordering_fields = ["created_at", "role"]
    ordering = ["team__name", "user__username"]

    def get_queryset(self) -> QuerySet[Membership]:
        teams = Team.objects.visible_to(self.request.user)
        return Membership.objects.filter(team__in=teams).select_related("team", "user")

    def _check_manageable(self, team: Team) -> None:
        if not Team.objects.manageable_by(self.request.user).filter(pk=team.pk).exists():
            raise exceptions.PermissionDenied(f"Only admins of team '{team.slug}' change its members.")

    def perform_create(self, serializer: BaseSerializer) -> None:
        self._check_manageable(serializer.validated_data["team"])
        with transaction.atomic(), api_actor(self.request):
            serializer.save()

    def perform_update(self, serializer: BaseSerializer) -> None:
        self._check_manageable(serializer.instance.team)  # type: ignore[union-attr]
        with transaction.atomic(), api_actor(self.request):
            serializer.save()

    def perform_destroy(self, instance: Membership) -> None:
        self._check_manageable(instance.team)
        with transaction.atomic(), api_actor(self.request):
            instance.delete()
