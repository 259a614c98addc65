"""Who may read the OpenAPI schema and the API docs: everyone with ``API_SCHEMA_PUBLIC``
(the default with DEBUG on), else signed-in users only (session or API token).

The schema lists every endpoint, parameter and error of the portal: useful to a user and
to an attacker mapping the surface, so a production portal publishes it only by choice.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from drf_spectacular.views import SpectacularAPIView
from rest_framework import exceptions
from rest_framework.request import Request

from kai_portal.core.schema_access import SchemaAccess


class SchemaView(SpectacularAPIView):
    """The schema (``/api/schema/``); a refusal says how an operator publishes it."""

    def permission_denied(
        self, request: Request, message: str | None = None, code: str | None = None
    ) -> NoReturn:
        if request.authenticators and not request.successful_authenticator:
            raise exceptions.NotAuthenticated(SchemaAccess.message)
        super().permission_denied(request, message, code)


def docs_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The HTML docs (Swagger UI, ReDoc): a browser that is not signed in goes to the sign-in page."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # A request with an Authorization header goes on: DRF authenticates the token and
        # SchemaAccess decides (a bad token is the API's usual 401, not a sign-in page).
        signed_in = request.user.is_authenticated or "HTTP_AUTHORIZATION" in request.META
        if not settings.API_SCHEMA_PUBLIC and not signed_in:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped
