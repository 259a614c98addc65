"""API tokens: create, revoke, and authenticate requests that carry one.

Scheme: ``Authorization: Bearer <secret>`` (``Token <secret>`` also works).
Secrets look like ``kai_<43 url-safe characters>``; the database keeps only
their SHA-256 and the first 12 characters. Authentication with a revoked or
unknown token, an expired one (``expires_at``, optional) or an inactive user
is a 401. ``last_used_at`` is refreshed at most once a minute so busy scripts
do not write on every request.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from kai_portal.accounts.models import ApiToken
from kai_portal.core.client_address import client_address

SECRET_PREFIX = "kai_"
PREFIX_LENGTH = 12
_KEYWORDS = {"bearer", "token"}
_TOUCH_EVERY = timedelta(minutes=1)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_token(
    user: Any, name: str, *, read_only: bool = False, expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns the row and the secret, which is never shown again.
    With ``expires_at`` it answers 401 from that moment on."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name.strip()[:100] or "token",
        prefix=secret[:PREFIX_LENGTH],
        key_hash=hash_secret(secret),
        read_only=read_only,
        expires_at=expires_at,
    )
    return token, secret


def revoke_token(token: ApiToken) -> bool:
    """Revoke a token (idempotent); False if it was already revoked."""
    now = timezone.now()
    changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    token.refresh_from_db(fields=["revoked_at"])
    return changed == 1


def tokens_of(user: Any) -> Any:
    """The user's tokens, newest first, for the token page."""
    return ApiToken.objects.filter(user=user)


class FailedTokenThrottle(SimpleRateThrottle):
    """Failed token authentications per key (rate ``token_failure``, e.g. 30/min).

    Two keys are counted for every failure: the client's address (``core/client_address``,
    through ``NUM_PROXIES`` trusted proxies) and the failed secret's first ``PREFIX_LENGTH``
    characters. DRF runs throttles after authentication, so a failed authentication never
    reaches them; ``ApiTokenAuthentication`` consults this one itself, and only for a token
    that failed: a valid token is never refused because of failures, its own address's or
    anyone else's (a 256-bit secret is not guessed in 30 tries a minute or in 30 million)."""

    scope = "token_failure"

    def __init__(self, ident: str) -> None:
        self.ident = ident
        super().__init__()

    def get_rate(self) -> str | None:
        # Read when used, not when the class is defined, so a changed setting applies.
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return None if rate is None else str(rate)

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.ident}

    def record_failure(self) -> bool:
        """Count one failure; False when the key is (or now goes) over the rate."""
        return bool(self.allow_request(None, None))  # type: ignore[arg-type]  # no request or view involved


def failure_keys(request: Any, secret: str | None) -> list[FailedTokenThrottle]:
    """The throttles a failed token counts against: its client's address and its prefix."""
    keys = [FailedTokenThrottle(f"address:{client_address(request)}")]
    if secret:
        keys.append(FailedTokenThrottle(f"prefix:{secret[:PREFIX_LENGTH]}"))
    return keys


def _refuse(request: Any, secret: str | None, message: str) -> Exception:
    """A failed token: 401, or 429 when its address or its prefix has failed too often."""
    waits = []
    for throttle in failure_keys(request, secret):
        # Every key counts the failure, even when another is already over its rate.
        if not throttle.record_failure():
            waits.append(throttle.wait() or 0.0)
    if waits:
        return exceptions.Throttled(
            max(waits),
            detail="Too many failed API token attempts from this address or with this token prefix; "
            "a valid token still works.",
        )
    return exceptions.AuthenticationFailed(message)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """DRF authentication from ``Authorization: Bearer <secret>`` or ``Token <secret>``.

    Guessing is throttled: past the ``token_failure`` rate of failures from one client
    address, or with one token prefix, every *failed* token is a 429 instead of a 401
    (``FailedTokenThrottle``); a valid token is always accepted."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode("latin-1").lower() not in _KEYWORDS:
            return None
        if len(header) != 2:
            raise _refuse(request, None, "Invalid Authorization header: expected 'Bearer <token>'.")
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise _refuse(request, None, "Invalid token.") from None
        token = (
            ApiToken.objects.select_related("user")
            .filter(key_hash=hash_secret(secret), revoked_at__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise _refuse(request, secret, "Invalid or revoked token.")
        now = timezone.now()
        if token.expires_at is not None and token.expires_at <= now:
            raise _refuse(
                request, secret,
                f"This token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; create a new one on the "
                "portal's API tokens page (/accounts/tokens/).",
            )  # fmt: skip
        if token.last_used_at is None or now - token.last_used_at > _TOUCH_EVERY:
            ApiToken.objects.filter(pk=token.pk).filter(
                Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - _TOUCH_EVERY)
            ).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class TokenScopePermission(permissions.BasePermission):
    """Read-only tokens may only make safe requests (403 otherwise)."""

    message = "This API token is read-only."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if isinstance(token, ApiToken) and token.read_only:
            return request.method in permissions.SAFE_METHODS
        return True


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes the token scheme in the OpenAPI schema."""

    target_class = "kai_portal.accounts.tokens.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from your account page: `Authorization: Bearer kai_...`.",
        }
