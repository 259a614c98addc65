"""Serves the probe and scrape endpoints before anything that could refuse them."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed

from kai_portal.monitoring import views

ENDPOINTS: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": views.healthz,
    "/readyz": views.readyz,
    "/metrics": views.metrics,
}


class ProbeMiddleware:
    """First in ``MIDDLEWARE``: answers ``ENDPOINTS`` itself.

    Kubelet probes and Prometheus reach a pod as ``http://<pod IP>:8000``: that
    host is not in ``ALLOWED_HOSTS`` and the scheme is not HTTPS, so host
    validation (CommonMiddleware) and ``SECURE_SSL_REDIRECT`` would turn every
    probe into a 400 or a redirect. These endpoints build no URLs from the
    Host header, so skipping those checks for them is safe.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = ENDPOINTS.get(request.path_info)
        if view is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        return view(request)
