"""Project-level pages: the landing page (probes are in kai_portal.monitoring)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect


def home(request: HttpRequest) -> HttpResponse:
    """Signed-in people land on the cluster overview; others on the sign-in page."""
    return redirect("cluster:overview" if request.user.is_authenticated else "accounts:login")
