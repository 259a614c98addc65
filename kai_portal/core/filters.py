"""Filter fields shared by the list pages and the API."""

from __future__ import annotations

from datetime import UTC, datetime

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 timestamp, normalised to UTC before it reaches the database.

    Python accepts UTC offsets up to ±23:59 but PostgreSQL only up to ±15:59,
    so an offset such as -19:03 is converted here instead of failing in SQL.
    """

    def to_python(self, value: object) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None or parsed.tzinfo is None:
            return parsed
        try:
            return parsed.astimezone(UTC)
        except OverflowError as error:  # before year 1 or after 9999 once in UTC
            raise ValidationError(self.error_messages["invalid"], code="invalid") from error


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField
