from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone


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


class ApiToken(models.Model):
    """A secret that lets a script act as its owner through the REST API.

    Only the SHA-256 hash of the secret is stored; the secret itself is shown
    once, when the token is created (``accounts.tokens.create_token``). The
    prefix is kept in clear so people can tell their tokens apart. An expiry is
    optional (``expires_at``; an expired token answers 401). A read-only
    token may only read. A revoked token answers 401 from then on.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'airflow'.")
    prefix = models.CharField(max_length=16, help_text="First characters of the secret, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    read_only = models.BooleanField(default=False, help_text="Only GET/HEAD/OPTIONS requests are allowed.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="After this moment the token answers 401; empty: it never expires."
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name}, {self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()
