"""Who may see and change which job or pod: the one access rule for workloads.

The rules filter on ``queue__team_id IN (SELECT team_id FROM memberships WHERE user = ...)``:
a subquery, not a join through the memberships, so no row is repeated and no
``DISTINCT`` (a sort/de-duplication of every selected column) is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

from kai_portal.workloads.choices import JobState

if TYPE_CHECKING:
    from kai_portal.workloads.models import Job, Pod  # noqa: F401 (named in the QuerySet bases)


def _team_ids(user: Any, **membership: Any) -> models.QuerySet:
    """Subquery: the ids of the teams ``user`` belongs to (narrowed by ``membership``, e.g. role)."""
    from kai_portal.teams.models import Membership  # workloads models load before teams'

    return Membership.objects.filter(user=user, **membership).values("team_id")


def _visible_filter(user: Any, prefix: str = "") -> models.Q | None:
    """None means 'everything' (portal admins)."""
    if getattr(user, "is_portal_admin", False):
        return None
    return models.Q(**{f"{prefix}queue__team_id__in": _team_ids(user)})


class JobQuerySet(models.QuerySet["Job"]):
    def active(self) -> JobQuerySet:
        """Jobs pending or running (``JobState.active()``): the ones a queue's tree rules guard."""
        return self.filter(state__in=JobState.active())

    def visible_to(self, user: Any) -> JobQuerySet:
        """Admins see every job; members the jobs of their teams' queues; nobody else anything."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        rule = _visible_filter(user)
        return self.all() if rule is None else self.filter(rule)

    def cancellable_by(self, user: Any) -> JobQuerySet:
        """Jobs this user may cancel: their own, their team's if team admin, any if portal admin."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if getattr(user, "is_portal_admin", False):
            return self.all()
        own = models.Q(submitter=user, queue__team_id__in=_team_ids(user))
        team_admin = models.Q(queue__team_id__in=_team_ids(user, role="admin"))
        return self.filter(own | team_admin)


class PodQuerySet(models.QuerySet["Pod"]):
    def visible_to(self, user: Any) -> PodQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        rule = _visible_filter(user, "job__")
        return self.all() if rule is None else self.filter(rule)
