"""Writes per user: at most ``WRITE_RATE`` (e.g. 120/min) changes, in the API and on the pages.

Every write costs the server real work (a manifest parsed and validated, a fit check that runs
the engine, rows and audit entries written), so one account cannot take the web workers from
everyone else. Reads are not counted. One count per user, shared by the API (DRF
``DEFAULT_THROTTLE_CLASSES``) and the page views that submit (``throttle_writes``); a client
that is not signed in is counted by its address (``core/client_address``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import UserRateThrottle

from kai_portal.core.client_address import client_address


class WriteRateThrottle(UserRateThrottle):
    """POST, PUT, PATCH and DELETE per user, at ``WRITE_RATE``."""

    scope = "user_writes"

    def get_rate(self) -> str | None:
        # Read when used (a changed setting applies), not once when the class is defined.
        return str(settings.WRITE_RATE)

    def get_ident(self, request: Any) -> str:
        return client_address(request)

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return bool(super().allow_request(request, view))


def refusal(wait: float | None) -> str:
    """The 429's message: the rate, and when to try again."""
    seconds = max(1, math.ceil(wait or 1))
    return (
        f"Too many changes: at most {settings.WRITE_RATE} per user (WRITE_RATE). "
        f"Nothing was saved; try again in {seconds} s."
    )


def throttle_writes(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page view whose POSTs count against the user's write rate (429 page past it)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = WriteRateThrottle()
        if not throttle.allow_request(request, None):
            wait = throttle.wait()
            response = render(request, "429.html", {"message": refusal(wait)}, status=429)
            response["Retry-After"] = str(max(1, math.ceil(wait or 1)))
            return response
        return view(request, *args, **kwargs)

    return wrapped
