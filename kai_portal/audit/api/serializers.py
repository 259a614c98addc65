from __future__ import annotations

from rest_framework import serializers

from kai_portal.audit.models import AuditEntry


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", read_only=True)
    model = serializers.CharField(source="content_type.model", read_only=True)
    changed_fields = serializers.ListField(child=serializers.CharField(), read_only=True)
    before = serializers.JSONField(read_only=True, allow_null=True)
    after = serializers.JSONField(read_only=True, allow_null=True)

    class Meta:
        model = AuditEntry
        fields = [
            "id", "at", "actor", "source", "action", "model", "object_id", "object_repr", "before", "after",
            "changed_fields",
        ]  # fmt: skip
