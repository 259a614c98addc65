"""The client's address as the portal should see it: through ``NUM_PROXIES`` trusted proxies.

Behind an ingress every request's ``REMOTE_ADDR`` is the ingress's; each proxy appends
the address it received the request from to ``X-Forwarded-For``. With ``NUM_PROXIES``
proxies in front, the client is the ``NUM_PROXIES``-th entry from the right: entries
left of it were written by the client itself and prove nothing. Token-failure throttling
(``accounts/tokens.py``) and the sign-in lockout (django-axes, ``AXES_CLIENT_IP_CALLABLE``)
both use this one function, so a client counts as the same client for both.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings


def client_address(request: Any) -> str:
    """``REMOTE_ADDR``, or the address the outermost trusted proxy saw (as DRF's ``get_ident``)."""
    remote = str(request.META.get("REMOTE_ADDR") or "")
    proxies = int(settings.NUM_PROXIES)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if proxies <= 0 or not forwarded:
        return remote
    entries = [entry.strip() for entry in str(forwarded).split(",") if entry.strip()]
    if not entries:
        return remote
    return entries[-min(proxies, len(entries))]
