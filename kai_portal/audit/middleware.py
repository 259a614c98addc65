from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from kai_portal.core.actor import acting_as


class AuditActorMiddleware:
    """Makes the signed-in user the actor of every audited change in the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        source = "admin" if request.path.startswith("/admin/") else "web"
        with acting_as(user if user is not None and user.is_authenticated else None, source):
            return self.get_response(request)
