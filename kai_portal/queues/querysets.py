"""Who may see, edit and submit to which queue: the one access rule for queues."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from kai_portal.queues.models import Queue  # noqa: F401 (named in the QuerySet["Queue"] base)


class QueueQuerySet(models.QuerySet["Queue"]):
    def visible_to(self, user: Any) -> QueueQuerySet:
        """Admins see the whole tree; others their teams' queues and the ancestors above them.

        Ancestors are included so a member sees the departments their fair share is divided from.
        """
        if not getattr(user, "is_authenticated", False):
            return self.none()
        if getattr(user, "is_portal_admin", False):
            return self.all()
        names: set[str] = set()
        parent_of = dict(self.model.objects.values_list("name", "parent__name"))
        name: str | None
        for name in self.model.objects.filter(team__memberships__user=user).values_list("name", flat=True):
            while name and name not in names:
                names.add(name)
                name = parent_of.get(name)
        return self.filter(name__in=names)

    def manageable_by(self, user: Any) -> QueueQuerySet:
        """Queues whose quotas this user may change: portal admins only (quotas are capacity)."""
        if getattr(user, "is_portal_admin", False):
            return self.all()
        return self.none()

    def leaves(self) -> QueueQuerySet:
        return self.filter(children__isnull=True)

    def submittable_by(self, user: Any) -> QueueQuerySet:
        """Leaf queues of the user's teams (admins: every leaf): where they may submit jobs."""
        if not getattr(user, "is_authenticated", False):
            return self.none()
        leaves = self.leaves()
        if getattr(user, "is_portal_admin", False):
            return leaves
        return leaves.filter(team__memberships__user=user).distinct()
