"""Row-by-row values written in one statement: ``UPDATE ... FROM (VALUES ...)``.

A cycle at 50,000 pods gives thousands of pods and jobs each their own text (pod fit errors name
the pod); one UPDATE per row, or Django's ``bulk_update`` (a CASE per column, slow to compile at
that size), dominated the cycle's persistence. PostgreSQL and SQLite (3.33+) both accept this form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, Model

CHUNK = 2000
IN_CHUNK = 5000  # ids per ``IN (...)``: SQLite caps a statement's parameters

T = TypeVar("T")


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size`` (for ``pk__in`` lookups)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def update_rows(
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[tuple[object, ...]],
    constants: Mapping[str, object] | None = None,
) -> None:
    """Set ``fields`` of each row ``(pk, value, ...)`` to its values, and every ``constants``
    field to the same value, for the rows whose primary key is listed."""
    if not rows:
        return
    meta = model._meta
    q = connection.ops.quote_name
    table = q(meta.db_table)
    pk = q(meta.pk.column)  # type: ignore[union-attr]
    # Concrete columns only (get_field's type also covers reverse relations, which have none).
    model_fields: list[Field[Any, Any]] = [meta.get_field(f) for f in fields]  # type: ignore[misc]
    const: list[tuple[Field[Any, Any], object]] = [
        (meta.get_field(f), value)  # type: ignore[misc]
        for f, value in (constants or {}).items()
    ]
    sets = [f"{q(field.column)} = v.c{i}" for i, field in enumerate(model_fields)]
    sets += [f"{q(field.column)} = %s" for field, _ in const]
    names = ", ".join(["id"] + [f"c{i}" for i in range(len(model_fields))])
    # Values as Django would write them on this backend (datetimes above all).
    const_params = [field.get_db_prep_value(value, connection) for field, value in const]
    width = 1 + len(model_fields)
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        values = ", ".join(["(" + ", ".join(["%s"] * width) + ")"] * len(chunk))
        # A CTE with a column list: the one VALUES form PostgreSQL and SQLite both accept.
        sql = (
            f"WITH v({names}) AS (VALUES {values}) "
            f"UPDATE {table} SET {', '.join(sets)} FROM v WHERE {table}.{pk} = v.id"
        )
        params: list[Any] = []
        for row in chunk:
            params.append(row[0])
            params += [
                field.get_db_prep_value(value, connection)
                for field, value in zip(model_fields, row[1:], strict=True)
            ]
        params += const_params  # the SET placeholders come after the VALUES rows
        with connection.cursor() as cur:
            cur.execute(sql, params)
