"""Model fields shared by several apps."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models


class WholeNumberField(models.PositiveIntegerField):
    """A non-negative integer that refuses fractional input instead of truncating it.

    Django's IntegerField turns 1.5 into 1 silently; for a count of GPUs that
    would hide a user's mistake.
    """

    def to_python(self, value: Any) -> Any:
        if value is None or isinstance(value, int):
            return value
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            raise ValidationError(
                "Enter a whole number (got %(value)s).", code="invalid", params={"value": value}
            ) from None
        if number != number.to_integral_value():
            raise ValidationError(
                "Must be a whole number (got %(value)s).", code="not_whole", params={"value": value}
            )
        return int(number)
