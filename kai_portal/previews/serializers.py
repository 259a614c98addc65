"""The API's shape of a pending job's forecast (the job endpoints embed it)."""

from __future__ import annotations

from rest_framework import serializers


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
