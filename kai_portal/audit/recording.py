"""Writes an AuditEntry for every create, update and delete of audited models.

The one place audit happens. It hooks model signals (so the admin, forms, the
API, commands and cascading deletes are all covered) and reads the actor from
``kai_portal.core.actor``. ``QuerySet.update()`` bypasses signals; audited
models are changed through single-object saves only.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.signals import post_delete, post_save, pre_save

from kai_portal.audit.models import AuditEntry
from kai_portal.core.actor import current_actor

AUDITED_MODELS = ("teams.Team", "teams.Membership", "queues.Queue")


def snapshot(instance: models.Model) -> dict[str, Any]:
    """The instance's stored fields as plain JSON values (auto-updated timestamps left out)."""
    data: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        if getattr(field, "auto_now", False):
            continue
        value = field.value_from_object(instance)
        if isinstance(field, models.DecimalField) and value is not None:
            # Same text whether the value came from the database ("4.00") or from code (4).
            value = Decimal(value).quantize(Decimal(1).scaleb(-field.decimal_places))
        data[field.attname] = value
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))  # type: ignore[no-any-return]


def record(instance: models.Model, action: str, before: dict | None, after: dict | None) -> AuditEntry:
    actor = current_actor()
    user = actor.user
    return AuditEntry.objects.create(
        actor=user,
        actor_name=user.get_username() if user is not None else "",
        source=actor.source,
        action=action,
        content_type=ContentType.objects.get_for_model(instance, for_concrete_model=True),
        object_id=str(instance.pk),
        object_repr=str(instance)[:200],
        before=before,
        after=after,
    )


def _capture_before(sender: type[models.Model], instance: models.Model, raw: bool = False, **_: Any) -> None:
    if raw or instance.pk is None:
        instance._audit_before = None  # type: ignore[attr-defined]
        return
    stored = sender._default_manager.filter(pk=instance.pk).first()
    instance._audit_before = snapshot(stored) if stored is not None else None  # type: ignore[attr-defined]


def _record_save(instance: models.Model, created: bool, raw: bool = False, **_: Any) -> None:
    if raw:
        return
    after = snapshot(instance)
    before = getattr(instance, "_audit_before", None)
    if created or before is None:
        record(instance, "create", None, after)
    elif before != after:
        record(instance, "update", before, after)
    instance._audit_before = after  # type: ignore[attr-defined]


def _record_delete(instance: models.Model, **_: Any) -> None:
    record(instance, "delete", snapshot(instance), None)


def connect() -> None:
    from django.apps import apps

    for label in AUDITED_MODELS:
        model = apps.get_model(label)
        uid = f"kai-audit-{label}"
        pre_save.connect(_capture_before, sender=model, dispatch_uid=f"{uid}-pre")
        post_save.connect(_record_save, sender=model, dispatch_uid=f"{uid}-post")
        post_delete.connect(_record_delete, sender=model, dispatch_uid=f"{uid}-delete")
