"""REST API routes, mounted at /api/v1/ by the root URLconf. Each app brings its own router."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("", include("kai_portal.accounts.api.urls")),
    path("", include("kai_portal.teams.api.urls")),
    path("", include("kai_portal.queues.api.urls")),
    path("", include("kai_portal.workloads.api.urls")),
    path("", include("kai_portal.cluster.api.urls")),
    path("", include("kai_portal.scheduling.api.urls")),
    path("", include("kai_portal.audit.api.urls")),
]
