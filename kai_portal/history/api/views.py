"""Scheduling history: cycles (everyone signed in), and the decisions and job
messages of the jobs you can see."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kai_portal.history.api.serializers import (
    CycleSerializer,
    DecisionSerializer,
    FairnessAuditSerializer,
    JobMessageSerializer,
)
from kai_portal.history.filtersets import CycleFilterSet, DecisionFilterSet, JobMessageFilterSet
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle
from kai_portal.scheduling import fairness_audit
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


class FairnessAuditView(APIView):
    """``GET /api/v1/fairness-audit/``: the fairness audit's findings (portal admins only)."""

    @extend_schema(responses={200: FairnessAuditSerializer})
    def get(self, request: Request) -> Response:
        if not getattr(request.user, "is_portal_admin", False):
            raise exceptions.PermissionDenied("The fairness audit is for portal admins.")
        findings = fairness_audit.audit(timezone.now())
        return Response(FairnessAuditSerializer({"count": len(findings), "results": findings}).data)
