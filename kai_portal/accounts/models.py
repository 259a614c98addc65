from __future__ import annotations

from django.contrib.auth.models import AbstractUser


class User(AbstractUser):
    """A person who signs in to the portal.

    Portal admins are superusers: they run the Django admin and may change
    every team, queue and quota. Team roles live on ``teams.Membership``.
    """

    @property
    def is_portal_admin(self) -> bool:
        return self.is_active and self.is_superuser

    def __str__(self) -> str:
        return self.username
