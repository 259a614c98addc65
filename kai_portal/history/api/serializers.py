from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import serializers

from kai_portal.history.models import Decision, JobMessage, SchedulingCycle

if TYPE_CHECKING:
    from kai_portal.cluster.models import Node
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


class JobAheadSerializer(serializers.Serializer):
    uid = serializers.UUIDField()
    name = serializers.CharField()
    queue = serializers.CharField(source="queue.name")


class ForecastSerializer(serializers.Serializer):
    """Where a pending job stands: positions, the jobs ahead (other teams' only counted), estimated start.

    ``estimated_start`` is null when unknown; ``unknown`` then says why
    (``never_fits``, ``no_duration``, ``beyond_horizon``, ``not_yet_considered``, or ``not_before``:
    the simulation's time budget ran out first; it starts after ``not_before`` if at all).
    Computed by the scheduling worker after a cycle: positions as of ``computed_at``, the
    estimate as of ``estimated_at`` (older when the simulation's time budget did not reach
    the job again; null = not estimated yet)."""

    pool = serializers.CharField()
    queue_position = serializers.IntegerField(allow_null=True, help_text="1 = next in its leaf queue.")
    queue_pending = serializers.IntegerField()
    cluster_position = serializers.IntegerField(allow_null=True, help_text="1 = next in its node pool.")
    cluster_pending = serializers.IntegerField()
    jobs_ahead = serializers.IntegerField()
    estimated_start = serializers.DateTimeField(allow_null=True)
    unknown = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
    computed_at = serializers.DateTimeField(allow_null=True, help_text="The cycle the positions are from.")
    estimated_at = serializers.DateTimeField(
        allow_null=True, help_text="When the estimate was made; null = not estimated yet."
    )
    not_before = serializers.DateTimeField(
        allow_null=True, help_text="unknown = not_before: a lower bound of the start (else null)."
    )


class ForecastDetailSerializer(ForecastSerializer):
    ahead_visible = JobAheadSerializer(many=True, help_text="Jobs ahead that you may see.")
    ahead_other_teams = serializers.IntegerField(help_text="Jobs ahead of other teams (not named).")


class FindingSerializer(serializers.Serializer):
    queue = serializers.CharField()
    kind = serializers.CharField()
    kind_label = serializers.CharField()
    since = serializers.DateTimeField()
    evidence = serializers.DictField()
    summary = serializers.CharField()
    action = serializers.CharField()
    job_uid = serializers.CharField(allow_blank=True)
    details = serializers.ListField(child=serializers.CharField())


class FairnessAuditSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = FindingSerializer(many=True)
