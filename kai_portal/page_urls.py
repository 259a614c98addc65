"""Browser pages, mounted at / by the root URLconf. Each app adds its own include here."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

urlpatterns: list[URLPattern | URLResolver] = [
    path("accounts/", include("kai_portal.accounts.urls")),
    path("cluster/", include("kai_portal.web.cluster.urls")),
    path("queues/", include("kai_portal.web.queues.urls")),
    path("jobs/", include("kai_portal.web.workloads.urls")),
    path("teams/", include("kai_portal.web.teams.urls")),
    path("audit/", include("kai_portal.audit.urls")),
    path("fairness/", include("kai_portal.reports.fairness_urls")),
    path("showback/", include("kai_portal.reports.showback_urls")),
    path("planner/", include("kai_portal.planning.urls")),
]
