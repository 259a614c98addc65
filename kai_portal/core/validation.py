"""A model base class that validates on every save, so services, commands,
forms, the admin and the API all run the same ``full_clean`` rules."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import DatabaseError, connections, models, router


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

    def validate_constraints(self, exclude: Any = None) -> None:
        """Django's constraint validation, except that a database fault is raised, not reported.

        Django checks a conditional constraint with ``Q.check``, which logs a ``DatabaseError`` and
        answers "matches": a dropped connection became "Constraint ... is violated", a 400 telling
        the user their request was wrong (issue 26). Every query it runs is watched here, and a
        refusal is only believed once the connection still answers."""
        alias = router.db_for_write(type(self), instance=self)
        faults: list[DatabaseError] = []

        def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            try:
                return execute(sql, params, many, context)
            except DatabaseError as exc:
                faults.append(exc)
                raise

        connection = connections[alias]
        with connection.execute_wrapper(watch):
            try:
                super().validate_constraints(exclude=exclude)
            except ValidationError:
                if faults:
                    raise faults[0] from None
                # A fault before any query ran (no connection to open a cursor on) is not seen by
                # ``watch``: ask the connection itself; a fault here propagates.
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
                if faults:
                    raise faults[0] from None
                raise
        if faults:
            raise faults[0]
