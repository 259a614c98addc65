"""Many rows in a few statements: updates from row values, inserts, and long id lists.

A cycle at 50,000 pods gives thousands of pods and jobs each their own text (pod fit errors name
the pod) and thousands of decision rows; one statement per row, or Django's ``bulk_update`` (a
CASE per column, slow to compile at that size) and ``bulk_create`` (a model instance and a
placeholder per value), dominated the cycle's persistence. On PostgreSQL the values travel as
one array per column (``unnest``), new rows by ``COPY`` and id lists as ``= ANY(array)``: a
handful of parameters whatever the row count, so neither Django nor psycopg handles one
placeholder per value. SQLite (``make run``'s database) gets the portable forms: ``UPDATE ...
FROM (VALUES ...)`` (3.33+), ``executemany`` and ``IN (...)`` in slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Field, Lookup, Model

CHUNK = 2000
IN_CHUNK = 5000  # ids per ``IN (...)``: SQLite caps a statement's parameters

T = TypeVar("T")

# Column types whose Python values both drivers take as they are (no ``get_db_prep_value`` per
# value): the cost of preparing 100,000 plain strings and ints is what these helpers avoid.
_PLAIN = frozenset({
    "AutoField", "BigAutoField", "BigIntegerField", "BooleanField", "CharField", "ForeignKey",
    "IntegerField", "PositiveIntegerField", "PositiveSmallIntegerField", "SmallIntegerField",
    "TextField", "OneToOneField",
})  # fmt: skip


def chunks(items: Sequence[T], size: int = IN_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in consecutive slices of at most ``size`` (for ``pk__in`` lookups)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _postgres() -> bool:
    return connection.vendor == "postgresql"


def id_slices(ids: Iterable[T]) -> Iterator[list[T]]:
    """``ids`` as the slices an :class:`AnyOf` filter takes: all at once on PostgreSQL (one array
    parameter), ``IN_CHUNK`` at a time elsewhere. Nothing when ``ids`` is empty."""
    items = list(ids)
    size = len(items) if _postgres() else IN_CHUNK
    for start in range(0, len(items), max(size, 1)):
        yield items[start : start + size]


class AnyOf(Lookup):  # type: ignore[type-arg]
    """``column = ANY(%s)`` with the whole list as one array on PostgreSQL, ``IN (...)`` elsewhere.

    Used as a filter expression: ``Pod.objects.filter(AnyOf(F("job_id"), ids))``. Django's
    ``__in`` builds and resolves one parameter per id (0.7 s for 37,500 ids at scale).
    """

    lookup_name = "any_of"
    prepare_rhs = False

    def _parts(self, compiler: Any, connection_: Any) -> tuple[str, list[Any], list[Any]]:
        lhs, lhs_params = compiler.compile(self.lhs)
        values = list(self.rhs)
        if not values:
            raise EmptyResultSet
        return lhs, list(lhs_params), values

    def as_sql(self, compiler: Any, connection_: Any) -> tuple[str, list[Any]]:
        lhs, params, values = self._parts(compiler, connection_)
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", params + values

    def as_postgresql(self, compiler: Any, connection_: Any) -> tuple[str, list[Any]]:
        lhs, params, values = self._parts(compiler, connection_)
        return f"{lhs} = ANY(%s::{_cast_type(self.lhs.output_field, connection_)}[])", params + [values]


def _cast_type(field: Field[Any, Any], conn: Any = connection) -> str:
    """The column type to cast an array parameter to (a foreign key: its target's)."""
    return str(field.cast_db_type(conn))  # type: ignore[attr-defined]


def _preparers(fields: Sequence[Field[Any, Any]]) -> list[Any]:
    """Per column: None where values go as they are, else the field's own preparation."""
    return [None if f.get_internal_type() in _PLAIN else _Prepare(f) for f in fields]


class _Prepare:
    """``field.get_db_prep_value`` remembering its last answer: a column often holds one value in
    every row (the cycle's time in 12,000 decisions)."""

    def __init__(self, field: Field[Any, Any]) -> None:
        self.field = field
        self.last: tuple[object, object] | None = None

    def __call__(self, value: object) -> object:
        if self.last is not None and self.last[0] is value:
            return self.last[1]
        prepared = self.field.get_db_prep_value(value, connection)
        self.last = (value, prepared)
        return prepared


def _prepared(rows: Iterable[Sequence[object]], preparers: list[Any]) -> Iterator[tuple[object, ...]]:
    if all(p is None for p in preparers):
        yield from (tuple(row) for row in rows)
        return
    for row in rows:
        yield tuple(v if p is None else p(v) for p, v in zip(preparers, row, strict=True))


def insert_rows(model: type[Model], fields: Sequence[str], rows: Sequence[Sequence[object]]) -> int:
    """Insert ``rows`` (values of ``fields``, by attribute name: ``cycle_id``, not ``cycle``).

    No model instances, no ``save()``, no signals, defaults or ``auto_now``: pass every value
    the row needs. PostgreSQL: one ``COPY``; otherwise ``executemany`` of one INSERT. Returns
    the number of rows."""
    if not rows:
        return 0
    meta = model._meta
    q = connection.ops.quote_name
    model_fields: list[Field[Any, Any]] = [
        next(f for f in meta.concrete_fields if f.attname == name) for name in fields
    ]
    columns = ", ".join(q(f.column) for f in model_fields)
    values = _prepared(rows, _preparers(model_fields))
    with connection.cursor() as cur:
        if _postgres():
            with cur.cursor.copy(f"COPY {q(meta.db_table)} ({columns}) FROM STDIN") as copy:
                for row in values:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(model_fields))
            params: list[Any] = list(values)
            cur.executemany(f"INSERT INTO {q(meta.db_table)} ({columns}) VALUES ({placeholders})", params)
    return len(rows)


def update_rows(
    model: type[Model],
    fields: Sequence[str],
    rows: Sequence[tuple[object, ...]],
    constants: Mapping[str, object] | None = None,
    where: Mapping[str, object] | None = None,
) -> None:
    """Set ``fields`` of each row ``(pk, value, ...)`` to its values, and every ``constants``
    field to the same value, for the rows whose primary key is listed and whose ``where``
    fields equal the given values (a conditional transition: other rows are left alone)."""
    if not rows:
        return
    meta = model._meta
    q = connection.ops.quote_name
    table = q(meta.db_table)
    pk_field: Field[Any, Any] = meta.pk  # type: ignore[assignment]
    pk = q(pk_field.column)
    # Concrete columns only (get_field's type also covers reverse relations, which have none).
    model_fields: list[Field[Any, Any]] = [meta.get_field(f) for f in fields]  # type: ignore[misc]
    const: list[tuple[Field[Any, Any], object]] = [
        (meta.get_field(f), value)  # type: ignore[misc]
        for f, value in (constants or {}).items()
    ]
    conditions: list[tuple[Field[Any, Any], object]] = [
        (meta.get_field(f), value)  # type: ignore[misc]
        for f, value in (where or {}).items()
    ]
    sets = [f"{q(field.column)} = v.c{i}" for i, field in enumerate(model_fields)]
    sets += [f"{q(field.column)} = %s" for field, _ in const]
    wheres = "".join(f" AND {table}.{q(field.column)} = %s" for field, _ in conditions)
    names = ", ".join(["id"] + [f"c{i}" for i in range(len(model_fields))])
    # Values as Django would write them on this backend (datetimes above all).
    const_params = [field.get_db_prep_value(value, connection) for field, value in const]
    where_params = [field.get_db_prep_value(value, connection) for field, value in conditions]
    prepared = list(_prepared(rows, _preparers([pk_field, *model_fields])))
    if _postgres():
        # One array per column, whatever the number of rows.
        arrays = ", ".join(f"%s::{_cast_type(f)}[]" for f in [pk_field, *model_fields])
        sql = (
            f"UPDATE {table} SET {', '.join(sets)} FROM unnest({arrays}) AS v({names}) "
            f"WHERE {table}.{pk} = v.id{wheres}"
        )
        columns = [list(column) for column in zip(*prepared, strict=True)]
        with connection.cursor() as cur:
            cur.execute(sql, [*const_params, *columns, *where_params])
        return
    width = 1 + len(model_fields)
    for chunk in chunks(prepared, CHUNK):
        values = ", ".join(["(" + ", ".join(["%s"] * width) + ")"] * len(chunk))
        # A CTE with a column list: the VALUES form SQLite accepts in UPDATE ... FROM.
        sql = (
            f"WITH v({names}) AS (VALUES {values}) "
            f"UPDATE {table} SET {', '.join(sets)} FROM v WHERE {table}.{pk} = v.id{wheres}"
        )
        params: list[Any] = [value for row in chunk for value in row]
        # The SET placeholders come after the VALUES rows, the WHERE ones last.
        with connection.cursor() as cur:
            cur.execute(sql, [*params, *const_params, *where_params])
