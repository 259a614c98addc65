"""The permission of the OpenAPI schema views (drf-spectacular's ``SERVE_PERMISSIONS``).

Its own module: drf-spectacular imports it while its views module loads, so it must not
import those views (``core/api_docs.py`` does).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import BasePermission
from rest_framework.request import Request


class SchemaAccess(BasePermission):
    """DRF permission of the schema views (drf-spectacular's ``SERVE_PERMISSIONS``)."""

    message = "The API schema is for signed-in users; an operator may publish it with API_SCHEMA_PUBLIC=1."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(settings.API_SCHEMA_PUBLIC or (request.user and request.user.is_authenticated))
