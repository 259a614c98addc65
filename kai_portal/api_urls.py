"""REST API routes, mounted at /api/v1/ by the root URLconf. Each app adds its own router here."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
