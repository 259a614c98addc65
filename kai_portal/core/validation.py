"""A model base class that validates on every save, so services, commands,
forms, the admin and the API all run the same ``full_clean`` rules."""

from __future__ import annotations

from typing import Any

from django.db import models


class ValidatedModel(models.Model):
    """Calls ``full_clean()`` before every ``save()``.

    Bulk paths (``QuerySet.update``/``bulk_create``) bypass it by design; the
    models that use this class are written through single-object saves.
    """

    class Meta:
        abstract = True

    def save(self, *args: Any, validate: bool = True, **kwargs: Any) -> None:
        """Validate, then save. ``validate=False`` is for multi-row operations
        (such as a YAML import) that validate every row once all are written."""
        if validate:
            self.full_clean()
        super().save(*args, **kwargs)
