from __future__ import annotations

from rest_framework import serializers

from kai_portal.scheduling.models import Decision, JobMessage, SchedulingCycle


class CycleSerializer(serializers.ModelSerializer):
    class Meta:
        model = SchedulingCycle
        fields = [
            "id", "started_at", "finished_at", "status", "duration_ms", "allocated_count", "pipelined_count",
            "evicted_count", "unschedulable_count", "counters", "error",
        ]  # fmt: skip


class DecisionSerializer(serializers.ModelSerializer):
    """What one cycle decided about one pod, with KAI's reason code and message."""

    cycle = serializers.PrimaryKeyRelatedField(read_only=True)
    pod = serializers.SlugRelatedField(slug_field="name", read_only=True)
    job = serializers.SlugRelatedField(slug_field="uid", read_only=True)
    node = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    evictor_job = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        allow_null=True,
        help_text="Name of the job that caused an eviction.",
    )
    evictor_queue = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = Decision
        fields = [
            "id", "cycle", "pod", "job", "kind", "action", "node", "evictor_job", "evictor_queue", "reason",
            "message", "created_at",
        ]  # fmt: skip


class JobMessageSerializer(serializers.ModelSerializer):
    cycle = serializers.PrimaryKeyRelatedField(read_only=True)
    job = serializers.SlugRelatedField(slug_field="uid", read_only=True)

    class Meta:
        model = JobMessage
        fields = ["id", "cycle", "job", "reason", "message"]
