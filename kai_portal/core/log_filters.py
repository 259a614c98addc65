"""Log filters for the console.

A 403 the portal means to give (a member opening the audit log, a read-only token writing)
is an answer, not a fault: Django's ``django.request`` logger still writes it as a warning with
the exception's traceback, which under ``make run`` buried the real errors.
"""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied
from rest_framework.exceptions import PermissionDenied as ApiPermissionDenied


class ExpectedRefusalFilter(logging.Filter):
    """Keeps the one-line "Forbidden" warning of an intended 403, without its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, PermissionDenied | ApiPermissionDenied):
            record.exc_info, record.exc_text = None, None
        return True
