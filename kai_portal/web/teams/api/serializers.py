from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from kai_portal.teams.models import Membership, Team

if TYPE_CHECKING:
    from kai_portal.queues.models import Queue


class TeamSerializer(serializers.ModelSerializer):
    member_count = serializers.IntegerField(read_only=True)
    queues: serializers.SlugRelatedField[Queue] = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True
    )

    class Meta:
        model = Team
        fields = ["slug", "name", "description", "pod_security", "member_count", "queues",
                  "max_pending_tasks", "max_pending_tasks_per_member", "created_at"]  # fmt: skip
        read_only_fields = ["created_at"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if not getattr(getattr(request, "user", None), "is_portal_admin", False):
            # Bounds on pending work are the portal admins' (a team admin may rename the team).
            for name in ("max_pending_tasks", "max_pending_tasks_per_member"):
                self.fields[name].read_only = True


class MembershipSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.none())
    user = serializers.SlugRelatedField(slug_field="username", queryset=get_user_model().objects.all())

    class Meta:
        model = Membership
        fields = ["id", "team", "user", "role", "created_at"]
        read_only_fields = ["id", "created_at"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        user = getattr(request, "user", None)
        # A team you cannot see does not exist for you (400 "does not exist", never a hint).
        self.fields["team"].queryset = Team.objects.visible_to(user)  # type: ignore[attr-defined]
        if self.instance is not None and not isinstance(self.instance, list | tuple):
            # Moving a membership to another team or person is a delete plus a create.
            self.fields["team"].read_only = True
            self.fields["user"].read_only = True
