"""Who may see and manage which team: the one access rule for teams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from kai_portal.teams.models import Team  # noqa: F401 (named in the QuerySet["Team"] base)


def _is_admin(user: Any) -> bool:
    return bool(getattr(user, "is_portal_admin", False))


class TeamQuerySet(models.QuerySet["Team"]):
    def visible_to(self, user: Any) -> TeamQuerySet:
        """Portal admins see every team; everyone else the teams they belong to."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if _is_admin(user):
            return self.all()
        return self.filter(memberships__user=user).distinct()

    def manageable_by(self, user: Any) -> TeamQuerySet:
        """Teams whose members and queues this user may change: admins all, team admins their own."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if _is_admin(user):
            return self.all()
        return self.filter(memberships__user=user, memberships__role="admin").distinct()
