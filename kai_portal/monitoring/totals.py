"""Add to and read the persisted running totals (``MetricTotal``).

``add`` is one ``INSERT ... ON CONFLICT DO UPDATE SET value = value + new``
statement for all of a cycle's increments (PostgreSQL, and SQLite for
``make run``), so concurrent writers never lose an increment and a cycle costs
one query however many label sets it touches.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import connection

from kai_portal.monitoring.models import MetricTotal

Labels = tuple[tuple[str, str], ...]


def labels_key(labels: Mapping[str, str]) -> str:
    """The canonical JSON of a label set (the ``MetricTotal.labels`` column)."""
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"))


def add(increments: Mapping[tuple[str, str], float]) -> None:
    """Add each amount to the total ``(name, labels_key)``, creating missing rows."""
    rows = [(name, key, float(amount)) for (name, key), amount in increments.items() if amount]
    if not rows:
        return
    table = connection.ops.quote_name(MetricTotal._meta.db_table)
    qn = connection.ops.quote_name
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    sql = (
        f"INSERT INTO {table} ({qn('name')}, {qn('labels')}, {qn('value')}) VALUES {values} "
        f"ON CONFLICT ({qn('name')}, {qn('labels')}) "
        f"DO UPDATE SET {qn('value')} = {table}.{qn('value')} + excluded.{qn('value')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [part for row in rows for part in row])


def read(names: Sequence[str]) -> dict[str, dict[Labels, float]]:
    """``{name: {((label, value), ...): total}}`` for the given metric names (one query)."""
    out: dict[str, dict[Labels, float]] = {name: {} for name in names}
    for name, key, value in MetricTotal.objects.filter(name__in=names).values_list("name", "labels", "value"):
        out[name][tuple(sorted(json.loads(key).items()))] = value
    return out


@dataclass(frozen=True)
class Histogram:
    """A histogram kept as totals: one row per bucket (non-cumulative), plus ``_sum`` and ``_count``.

    Buckets are stored by their upper bound, non-cumulative, so changing the
    bucket list later still reads correctly: a stored bound that is no longer
    a bucket is counted in the next larger bucket.
    """

    name: str
    buckets: tuple[float, ...]

    def observe(self, value: float) -> dict[tuple[str, str], float]:
        """The increments that record one observation (give them to ``add``)."""
        return {
            (f"{self.name}:bucket", labels_key({"le": _bound(self._bucket_for(value))})): 1.0,
            (f"{self.name}:sum", "{}"): value,
            (f"{self.name}:count", "{}"): 1.0,
        }

    def _bucket_for(self, value: float) -> float:
        i = bisect.bisect_left(self.buckets, value)
        return self.buckets[i] if i < len(self.buckets) else math.inf

    def names(self) -> tuple[str, ...]:
        return (f"{self.name}:bucket", f"{self.name}:sum", f"{self.name}:count")

    def cumulative(
        self, totals: Mapping[str, Mapping[Labels, float]]
    ) -> tuple[list[tuple[str, float]], float]:
        """``([(le, cumulative count), ..., ("+Inf", count)], sum)`` from ``read(self.names())``."""
        per_bucket = dict.fromkeys([*self.buckets, math.inf], 0.0)
        for labels, count in totals.get(f"{self.name}:bucket", {}).items():
            per_bucket[self._bucket_for(float(dict(labels)["le"]))] += count
        running = 0.0
        out = []
        for bound, count in per_bucket.items():
            running += count
            out.append((_bound(bound), running))
        total_sum = sum(totals.get(f"{self.name}:sum", {}).values())
        return out, total_sum


def _bound(value: float) -> str:
    return "+Inf" if math.isinf(value) else repr(float(value))
