from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import serializers

from kai_portal.history.models import Decision, JobMessage, SchedulingCycle

if TYPE_CHECKING:
    from kai_portal.nodes.models import Node
    from kai_portal.queues.models import Queue
    from kai_portal.workloads.models import Job


HIDDEN_ERROR = "The cycle failed; portal admins see the error."


class CycleSerializer(serializers.ModelSerializer):
    error = serializers.SerializerMethodField(
        help_text="Why a failed cycle failed: the traceback for portal admins (it names server paths), "
        "a note for everyone else."
    )

    class Meta:
        model = SchedulingCycle
        fields = [
            "id", "started_at", "finished_at", "status", "duration_ms", "allocated_count", "pipelined_count",
            "evicted_count", "unschedulable_count", "counters", "error",
        ]  # fmt: skip

    def get_error(self, cycle: SchedulingCycle) -> str:
        if not cycle.error:
            return ""
        request = self.context.get("request")
        if getattr(getattr(request, "user", None), "is_portal_admin", False):
            return cycle.error
        return HIDDEN_ERROR


class DecisionSerializer(serializers.ModelSerializer):
    """What one cycle decided about one pod, with KAI's reason code and message."""

    cycle: serializers.PrimaryKeyRelatedField[SchedulingCycle] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )
    pod = serializers.CharField(
        source="pod_name", read_only=True, help_text="The pod's name (kept after the pod is deleted)."
    )
    job: serializers.SlugRelatedField[Job] = serializers.SlugRelatedField(slug_field="uid", read_only=True)
    node: serializers.SlugRelatedField[Node] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    evictor_job: serializers.SlugRelatedField[Job] = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        allow_null=True,
        help_text="Name of the job that caused an eviction.",
    )
    evictor_queue: serializers.SlugRelatedField[Queue] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )

    class Meta:
        model = Decision
        fields = [
            "id", "cycle", "pod", "job", "kind", "action", "node", "evictor_job", "evictor_queue", "reason",
            "message", "created_at",
        ]  # fmt: skip


class JobMessageSerializer(serializers.ModelSerializer):
    cycle: serializers.PrimaryKeyRelatedField[SchedulingCycle] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )
    job: serializers.SlugRelatedField[Job] = serializers.SlugRelatedField(slug_field="uid", read_only=True)

    class Meta:
        model = JobMessage
        fields = ["id", "cycle", "job", "reason", "message"]
