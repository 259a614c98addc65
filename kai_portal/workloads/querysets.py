"""Who may see and change which job or pod: the one access rule for workloads."""

from __future__ import annotations

from typing import Any

from django.db import models


def _visible_filter(user: Any, prefix: str = "") -> models.Q | None:
    """None means 'everything' (portal admins)."""
    if getattr(user, "is_portal_admin", False):
        return None
    return models.Q(**{f"{prefix}queue__team__memberships__user": user})


class JobQuerySet(models.QuerySet):
    def visible_to(self, user: Any) -> JobQuerySet:
        """Admins see every job; members the jobs of their teams' queues; nobody else anything."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        rule = _visible_filter(user)
        return self.all() if rule is None else self.filter(rule).distinct()

    def cancellable_by(self, user: Any) -> JobQuerySet:
        """Jobs this user may cancel: their own, their team's if team admin, any if portal admin."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if getattr(user, "is_portal_admin", False):
            return self.all()
        own = models.Q(submitter=user, queue__team__memberships__user=user)
        team_admin = models.Q(queue__team__memberships__user=user, queue__team__memberships__role="admin")
        return self.filter(own | team_admin).distinct()


class PodQuerySet(models.QuerySet):
    def visible_to(self, user: Any) -> PodQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        rule = _visible_filter(user, "job__")
        return self.all() if rule is None else self.filter(rule).distinct()
