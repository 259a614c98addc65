from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


class AuditEntry(models.Model):
    """One change to a team, membership or queue: who, when, what, before and after.

    ``before``/``after`` hold the object's fields as JSON (``null`` for the side
    that did not exist). Entries are never edited or deleted by the portal.
    """

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        UPDATE = "update", "Updated"
        DELETE = "delete", "Deleted"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept if the user is deleted.")
    source = models.CharField(max_length=64, blank=True, help_text="web, a command name, or system.")
    action = models.CharField(max_length=8, choices=Action.choices)
    content_type = models.ForeignKey(ContentType, on_delete=models.PROTECT, related_name="+")
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["content_type", "object_id", "at"], name="audit_object_time")]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        return f"{who} {self.action}d {self.content_type.model} {self.object_repr}"

    def changed_fields(self) -> list[str]:
        """Names of the fields whose value differs between before and after."""
        before, after = self.before or {}, self.after or {}
        return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
