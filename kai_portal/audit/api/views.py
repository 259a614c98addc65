"""The audit log, read-only, for portal admins (as the audit page)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from rest_framework import permissions, viewsets
from rest_framework.request import Request

from kai_portal.audit.api.serializers import AuditEntrySerializer
from kai_portal.audit.filtersets import AuditEntryFilterSet
from kai_portal.audit.models import AuditEntry

if TYPE_CHECKING:
    from rest_framework.permissions import _SupportsHasPermission


class IsPortalAdmin(permissions.BasePermission):
    message = "Only portal admins read the audit log."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(getattr(request.user, "is_portal_admin", False))


class AuditEntryViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = AuditEntrySerializer
    filterset_class = AuditEntryFilterSet
    ordering_fields = ["at"]
    ordering = ["-at", "-id"]

    def get_permissions(self) -> list[_SupportsHasPermission]:
        return [*super().get_permissions(), IsPortalAdmin()]

    def get_queryset(self) -> QuerySet[AuditEntry]:
        return AuditEntry.objects.select_related("content_type")
