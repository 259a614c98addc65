"""Root URLs: pages at /<app>/, REST API at /api/v1/<app>/ (added by their apps)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView

from kai_portal import views
from kai_portal.core.api_docs import SchemaView, docs_page

admin.site.site_header = "KAI Portal administration"
admin.site.site_title = "KAI Portal admin"
admin.site.index_title = "Cluster, queues and teams"

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    # /healthz, /readyz and /metrics are answered by kai_portal.monitoring.middleware.ProbeMiddleware.
    path("admin/", admin.site.urls),
    path("api/v1/", include("kai_portal.api_urls")),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's init script as a file: the CSP allows no inline scripts.
    # Signed-in users only unless API_SCHEMA_PUBLIC (core/api_docs.py).
    path("api/docs/", docs_page(SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/redoc/", docs_page(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("", include("kai_portal.page_urls")),
]

handler400 = "kai_portal.views.bad_request"
handler404 = "kai_portal.views.not_found"
handler500 = "kai_portal.views.server_error"
