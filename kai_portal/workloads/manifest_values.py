"""A manifest's text and values, each read with the manifest path that names it in an error.

The vocabulary (KAI's labels and annotations, read here and written back by
``manifest_export``), ``ManifestError``, and the readers every step of ``manifests`` uses:
one document from the body, a mapping, a string map, a whole number, a Kubernetes quantity.
Each reader raises ``ManifestError`` at the path it was given, never echoing a huge value back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from kai_portal.cluster.backends.kubernetes import quantity
from kai_portal.core import safe_yaml
from kai_portal.workloads import limits as bounds

QUEUE_LABEL = "kai.scheduler/queue"
LEGACY_QUEUE_LABEL = "runai/queue"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
PRIORITY_LABEL = "priorityClassName"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_DEVICES = "gpu-fraction-num-devices"
MIN_MEMBER = "kai.scheduler/batch-min-member"
DURATION = "kai.portal/duration"
GPU_RESOURCE = "nvidia.com/gpu"
MAX_TASKS = bounds.MAX_TASKS
# Quantities beyond this are refused before any arithmetic (a 1e999999999 overflows Decimal).
_MAX_QUANTITY = Decimal(2**63)


class ManifestError(Exception):
    """A manifest that cannot become a job: ``path`` says where, ``message`` what is wrong."""

    def __init__(self, path: str, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        # Both may quote the user's input: never echo it back unbounded.
        self.path, self.message = safe_yaml.shorten(path, 200), safe_yaml.shorten(message)
        # Every (path, message) when there is more than one thing wrong (the pod policy's).
        self.problems = [(safe_yaml.shorten(p, 200), safe_yaml.shorten(m)) for p, m in problems or []] or [
            (self.path, self.message)
        ]
        super().__init__(f"{path}: {message}")


class ManifestTooLarge(ManifestError):
    """A manifest over ``MANIFEST_MAX_BYTES`` (the API answers 413)."""


# A label or annotation looked up by key: (its manifest path, its value), or None when absent.
Lookup = Callable[[str], tuple[str, str] | None]


def key_path(prefix: str, key: str) -> str:
    return f'{prefix}["{key}"]'


def load_document(text: str | bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ManifestError("(body)", "is not UTF-8 text") from None
    if not text.strip():
        raise ManifestError("(body)", "is empty; send a Pod or batch/v1 Job manifest as YAML or JSON")
    try:
        docs = [d for d in safe_yaml.load_all(text, safe_yaml.manifest_bounds()) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError("(body)", f"is not valid YAML or JSON: {safe_yaml.describe(exc)}") from None
    except safe_yaml.TooLargeYamlError as exc:
        raise ManifestTooLarge("(body)", f"{exc} (MANIFEST_MAX_BYTES)") from None
    except safe_yaml.UnsafeYamlError as exc:
        raise ManifestError("(body)", str(exc)) from None
    if len(docs) != 1:
        raise ManifestError("(body)", f"must hold exactly one manifest (found {len(docs)})")
    if not isinstance(docs[0], dict):
        raise ManifestError("(body)", f"must be a mapping (got {type(docs[0]).__name__})")
    return docs[0]


def mapping_at(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ManifestError(path, f"must be a mapping (got {type(value).__name__})")
    return value


def string_map_at(value: Any, path: str) -> dict[str, str]:
    mapping = mapping_at(value, path)
    for key, item in mapping.items():
        if not isinstance(item, str):
            shown = json.dumps(item, default=str)
            raise ManifestError(key_path(path, str(key)), f"must be a string (got {shown})")
    return mapping


def whole_at(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise ManifestError(path, f"must be a whole number (got {value!r})")
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ManifestError(path, f"must be a whole number (got {shorten_value(value)})") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise ManifestError(path, f"must be a whole number (got {shorten_value(value)})")
    if number < minimum:
        raise ManifestError(path, f"must be at least {minimum} (got {shorten_value(value)})")
    if number > MAX_TASKS * 1000:
        raise ManifestError(path, f"is too large (got {shorten_value(value)})")
    return int(number)


def quantity_at(value: Any, path: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ManifestError(path, f"must be a quantity such as 500m or 8Gi (got {value!r})")
    try:
        number = quantity(value)
    except (ValueError, TypeError, InvalidOperation):
        raise ManifestError(path, f"must be a quantity such as 500m or 8Gi (got {value!r})") from None
    if not number.is_finite() or number < 0:
        raise ManifestError(path, f"must be a non-negative quantity (got {shorten_value(value)})")
    if number > _MAX_QUANTITY:
        raise ManifestError(path, f"is larger than any node (got {shorten_value(value)})")
    return number


def shorten_value(value: Any, limit: int = 80) -> str:
    """``repr`` of user input, cut short: an error never echoes a huge value back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
