"""REST API routes, mounted at /api/v1/ by the root URLconf. Each app brings its own router."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.urls import URLPattern, URLResolver, include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

API_MODULES = [
    "kai_portal.accounts.api.urls",
    "kai_portal.web.teams.api.urls",
    "kai_portal.web.queues.api.urls",
    "kai_portal.web.workloads.api.urls",
    "kai_portal.cluster.api.urls",
    "kai_portal.reports.api_urls",
    "kai_portal.audit.api.urls",
]


def _collections() -> dict[str, str]:
    """Each app router's collections: prefix -> namespaced URL name of its list route."""
    found: dict[str, str] = {}
    for name in API_MODULES:
        module = import_module(name)
        for prefix, _viewset, basename in module.router.registry:
            found[prefix] = f"{module.app_name}:{basename}-list"
    return found


class ApiRoot(APIView):
    """``/api/v1/``: where everything is (each app's router has its root view turned off, as they
    share this prefix; without this the README's API address answered 404)."""

    schema = None  # not an endpoint worth documenting in the schema
    collections = _collections()

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        def url(name: str) -> str:
            return reverse(name, request=request)

        return Response(
            {
                "docs": url("api-docs"),
                "schema": url("api-schema"),
                "me": url("accounts-api:me"),
                **{prefix: url(name) for prefix, name in self.collections.items()},
            }
        )


urlpatterns: list[URLPattern | URLResolver] = [
    path("", ApiRoot.as_view(), name="api-root"),
    *(path("", include(name)) for name in API_MODULES),
]
