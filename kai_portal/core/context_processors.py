"""Template context for the page header: who is signed in and in which teams."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def portal_user(request: HttpRequest) -> dict[str, Any]:
    """``header_memberships``: the signed-in user's teams with their role (one query, only when used)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"header_memberships": []}

    def memberships() -> list[Any]:
        return list(user.memberships.select_related("team").order_by("team__name"))

    return {"header_memberships": memberships}
