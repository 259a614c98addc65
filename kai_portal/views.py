"""Project-level pages: the landing page and a health check."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect


def home(request: HttpRequest) -> HttpResponse:
    """Signed-in people land on the cluster overview; others on the sign-in page."""
    return redirect("cluster:overview" if request.user.is_authenticated else "accounts:login")


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for containers: the process answers and the database is reachable."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
