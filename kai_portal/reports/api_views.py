"""``GET /api/v1/fairness-audit/``: the fairness audit over the API."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kai_portal.reports import fairness_audit
from kai_portal.reports.serializers import FairnessAuditSerializer


class FairnessAuditView(APIView):
    """``GET /api/v1/fairness-audit/``: the fairness audit's findings (portal admins only)."""

    @extend_schema(responses={200: FairnessAuditSerializer})
    def get(self, request: Request) -> Response:
        if not getattr(request.user, "is_portal_admin", False):
            raise exceptions.PermissionDenied("The fairness audit is for portal admins.")
        findings = fairness_audit.audit(timezone.now())
        return Response(FairnessAuditSerializer({"count": len(findings), "results": findings}).data)
