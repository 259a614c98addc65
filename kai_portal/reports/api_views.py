"""``GET /api/v1/fairness-audit/`` (the fairness audit) and ``GET /api/v1/gpu-use/`` (DCGM GPU use)."""

from __future__ import annotations

from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kai_portal.monitoring import gpu_use
from kai_portal.monitoring.models import JobGpuUse
from kai_portal.reports import fairness_audit
from kai_portal.reports.serializers import FairnessAuditSerializer, JobGpuUseSerializer
from kai_portal.workloads.models import Job


class FairnessAuditView(APIView):
    """``GET /api/v1/fairness-audit/``: the fairness audit's findings (portal admins only)."""

    @extend_schema(responses={200: FairnessAuditSerializer})
    def get(self, request: Request) -> Response:
        if not getattr(request.user, "is_portal_admin", False):
            raise exceptions.PermissionDenied("The fairness audit is for portal admins.")
        findings = fairness_audit.audit(timezone.now())
        return Response(FairnessAuditSerializer({"count": len(findings), "results": findings}).data)


class JobGpuUseViewSet(viewsets.ReadOnlyModelViewSet):
    """``GET /api/v1/gpu-use/``: the stored DCGM GPU use of the jobs you can see (none while
    ``PROMETHEUS_URL`` is unset). ``fresh`` is false past three read intervals."""

    serializer_class = JobGpuUseSerializer
    lookup_field = "job__uid"
    lookup_url_kwarg = "job_uid"
    ordering_fields = ["read_at", "mean_utilisation"]
    ordering = ["-read_at", "job_id"]

    def get_queryset(self) -> QuerySet[JobGpuUse]:
        if not gpu_use.enabled():  # off: nothing to say (the API root lists it all the same)
            return JobGpuUse.objects.none()
        visible = Job.objects.visible_to(self.request.user).values("pk")
        fresh_since = timezone.now() - gpu_use.stale_after()
        return (
            JobGpuUse.objects.filter(job__in=visible)
            .select_related("job__queue")
            .annotate(fresh=ExpressionWrapper(Q(read_at__gte=fresh_since), output_field=BooleanField()))
        )
