"""Project-level pages: the landing page (probes are in kai_portal.monitoring)."""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.views import defaults

from kai_portal.core import outages


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages that are not HTML (a job's YAML, a CSV)."""
    return redirect(static("img/favicon.svg"), permanent=True)


def home(request: HttpRequest) -> HttpResponse:
    """Signed-in people land on the cluster overview; others on the sign-in page."""
    return redirect("cluster:overview" if request.user.is_authenticated else "accounts:login")


# --- Error pages: JSON under /api/, the usual templates elsewhere ---------------------------------
# DRF renders its own errors as JSON, but a path no view matches, a body Django refuses before
# any view runs (RequestDataTooBig) and an unhandled exception never reach DRF.


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": f"No API endpoint or object at {request.path[:200]}."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its ``except``: a database fault raised before any view ran (a
    # middleware's session or user lookup) is an outage, answered as one (core/outages.py).
    fault = sys.exc_info()[1]
    if outages.is_database_fault(fault):
        return outages.unavailable(request, fault)  # type: ignore[arg-type]
    if _is_api(request):
        return JsonResponse({"detail": "Server error; it has been logged."}, status=500)
    return defaults.server_error(request)
