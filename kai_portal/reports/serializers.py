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
