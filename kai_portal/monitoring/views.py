"""Probe and scrape endpoints: ``/healthz`` (liveness), ``/readyz`` (readiness), ``/metrics``.

They are answered by ``ProbeMiddleware`` ahead of host validation and the HTTPS
redirect: kubelet probes and Prometheus call a pod by its IP over plain HTTP,
which ``ALLOWED_HOSTS`` and ``SECURE_SSL_REDIRECT`` would otherwise refuse.
None of them needs a session.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kai_portal.monitoring.collector import PortalCollector
from kai_portal.monitoring.health import Check, readiness_checks

# Only the database-backed collector: process metrics of whichever gunicorn
# worker answered would describe one process out of many.
REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(PortalCollector())


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. No database check: restarting the web would not fix the database."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 when the database answers, else 503 ``unavailable``. Redis down is 200
    ``degraded``: pages and the API work without it, so an orchestrator must keep the pod in
    rotation (taking every web pod out for a Redis outage would turn a slowdown into an outage)."""
    checks = readiness_checks()
    ready = all(check.ok for check in checks)
    degraded = any(check.error for check in checks)
    body = {
        "status": ("degraded" if degraded else "ok") if ready else "unavailable",
        "checks": {check.name: _state(check) for check in checks},
    }
    return JsonResponse(body, status=200 if ready else 503)


def _state(check: Check) -> str:
    """ "ok", "degraded: …" (works without it) or "failed: …"."""
    if not check.ok:
        return f"failed: {check.error}"
    return check.error or "ok"


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format; with ``METRICS_TOKEN`` set, only for ``Authorization: Bearer <token>``;
    without one, only with ``METRICS_PUBLIC`` (the default with DEBUG on)."""
    token = settings.METRICS_TOKEN
    if not token and not settings.METRICS_PUBLIC:
        return HttpResponse(
            "metrics are closed: set METRICS_TOKEN (scrapers then send Authorization: Bearer <token>) "
            "or METRICS_PUBLIC=1 to open them to anyone who can reach this address\n",
            status=403,
            content_type="text/plain",
        )
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("metrics need a bearer token\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
