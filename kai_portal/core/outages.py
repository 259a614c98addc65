"""A database outage answered as one: 503 with ``Retry-After``, never a 4xx or a 500.

A request that meets a database fault (a dropped connection, a restart, a failover, a
transaction the server aborted) could not be served *now*; a client or a person should retry,
and nothing was saved (the request's transaction is rolled back with the connection). An
``IntegrityError`` is not an outage: it is a rule the data broke, and the code that writes
answers it (a 400 or 409 naming the rule).

Three places answer it, so no path is left out: the API's exception handler
(``core/api.exception_handler``), ``DatabaseOutageMiddleware`` for pages and any other view,
and the 500 handler (``kai_portal/views.server_error``) for a fault raised before a view ran
(the session or the user looked up by a middleware).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError, IntegrityError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

# Seconds a client should wait before retrying: long enough for a connection pool or a
# failover to recover, short enough that a person retrying by hand is not kept waiting.
RETRY_AFTER_SECONDS = 5
MESSAGE = "The database is unavailable right now; nothing was saved. Retry in a few seconds."

logger = logging.getLogger(__name__)


def is_database_fault(exc: BaseException | None) -> bool:
    return isinstance(exc, DatabaseError) and not isinstance(exc, IntegrityError)


def log(what: str, exc: BaseException) -> None:
    # With the traceback: a ProgrammingError (a migration not applied yet) is answered 503 too.
    logger.error("database unavailable during %s: %s", what, exc, exc_info=exc)


def unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """The 503: JSON under /api/, a plain page elsewhere (rendered without the database)."""
    log(f"{request.method} {request.path[:200]}", exc)
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:
        # No context processors: they would ask the database for the signed-in user.
        page = loader.get_template("503.html").render({"message": MESSAGE})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseOutageMiddleware:
    """A view's database fault as ``unavailable`` (DRF views answer their own, see core/api.py)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return unavailable(request, exc) if is_database_fault(exc) else None
