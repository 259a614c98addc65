"""Typed readers for deploy-time settings taken from the environment.

Each helper rejects malformed values loudly (ImproperlyConfigured) instead of
silently falling back to a default, so a typo in a deployment fails at start.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    """The variable's value, or ``default`` when it is unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    """A boolean: 1/true/yes/on or 0/false/no/off (case-insensitive)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer, optionally with a lower bound."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_secret(name: str) -> str | None:
    """A secret from ``NAME`` or from the file named by ``NAME_FILE`` (Docker/Kubernetes secrets)."""
    value = os.environ.get(name)
    if value:
        return value
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip() or None
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from None
    return None
