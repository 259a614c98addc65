"""The API's shape of the fairness audit's findings."""

from __future__ import annotations

from rest_framework import serializers


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


class JobGpuUseSerializer(serializers.Serializer):
    """A job's GPU use as DCGM measured it (``monitoring.JobGpuUse``), with whether it is fresh."""

    job_uid = serializers.UUIDField(source="job.uid")
    job_name = serializers.CharField(source="job.name")
    queue = serializers.CharField(source="job.queue.name")
    read_at = serializers.DateTimeField()
    window_seconds = serializers.IntegerField()
    gpus_seen = serializers.IntegerField()
    idle_gpus_seen = serializers.IntegerField()
    mean_utilisation = serializers.FloatField(allow_null=True)
    memory_used_mib = serializers.FloatField(allow_null=True)
    fresh = serializers.BooleanField()
