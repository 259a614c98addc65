from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from rest_framework import serializers

from kai_portal.accounts.models import ApiToken, User
from kai_portal.teams.models import Membership, Team


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "prefix",
            "read_only",
            "created_at",
            "last_used_at",
            "revoked_at",
            "expires_at",
        ]
        read_only_fields = ["id", "prefix", "created_at", "last_used_at", "revoked_at"]

    def validate_expires_at(self, value: datetime | None) -> datetime | None:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("must be in the future (or left out: the token never expires).")
        return value


class NewApiTokenSerializer(ApiTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown once: store it now.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]


class MyMembershipSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Membership
        fields = ["team", "role"]


class MeSerializer(serializers.ModelSerializer):
    is_portal_admin = serializers.BooleanField(read_only=True)
    memberships = MyMembershipSerializer(many=True, read_only=True)

    class Meta:
        model = User
        fields = ["username", "first_name", "last_name", "email", "is_portal_admin", "memberships"]
