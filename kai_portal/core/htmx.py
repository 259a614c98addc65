"""One view, two templates: the whole page, or only its fragment when htmx asks."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """For annotations only: a request that went through django-htmx's middleware."""

    htmx: HtmxDetails


def is_fragment_request(request: HttpRequest) -> bool:
    """True for htmx requests that swap part of a page (not boosted full-page navigations)."""
    htmx: Any = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted and not htmx.history_restore_request


def page_or_fragment(request: HttpRequest, page: str, fragment: str) -> str:
    return fragment if is_fragment_request(request) else page
