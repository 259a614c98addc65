"""Scheduling history: cycles (everyone signed in), and the decisions and job
messages of the jobs you can see."""

from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets

from kai_portal.history.api.serializers import CycleSerializer, DecisionSerializer, JobMessageSerializer
from kai_portal.history.filtersets import CycleFilterSet, DecisionFilterSet, JobMessageFilterSet
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle
from kai_portal.workloads.models import Job


class CycleViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = CycleSerializer
    filterset_class = CycleFilterSet
    queryset = SchedulingCycle.objects.all()
    ordering_fields = ["started_at", "duration_ms"]
    ordering = ["-started_at"]


class DecisionViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = DecisionSerializer
    filterset_class = DecisionFilterSet
    ordering_fields = ["cycle", "created_at", "kind"]
    ordering = ["-cycle_id", "pod_id"]

    def get_queryset(self) -> QuerySet[Decision]:
        visible = Job.objects.visible_to(self.request.user).values("pk")
        return Decision.objects.filter(job__in=visible).select_related(
            "job", "node", "evictor_job", "evictor_queue"
        )


class JobMessageViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = JobMessageSerializer
    filterset_class = JobMessageFilterSet
    ordering_fields = ["cycle"]
    ordering = ["-cycle_id"]

    def get_queryset(self) -> QuerySet[JobMessage]:
        visible = Job.objects.visible_to(self.request.user).values("pk")
        return JobMessage.objects.filter(job__in=visible).select_related("job")
