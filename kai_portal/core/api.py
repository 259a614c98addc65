"""Base pieces shared by every app's REST API: pagination, errors, the audit actor,
optimistic concurrency. Nothing here knows about a particular model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model, ProtectedError, RestrictedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from kai_portal.core import outages, write_throttle
from kai_portal.core.actor import acting_as


class StandardPagination(PageNumberPagination):
    """``?page=2&page_size=100``; 50 rows by default, at most 500."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class Conflict(exceptions.APIException):
    """409: the object changed since the client read it, or is in a state that forbids the change."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object changed since you read it; fetch it again and retry."
    default_code = "conflict"


class DatabaseUnavailable(exceptions.APIException):
    """503 with ``Retry-After``: the database could not be reached; nothing was saved (core/outages.py)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = outages.MESSAGE
    default_code = "database_unavailable"
    wait = outages.RETRY_AFTER_SECONDS  # DRF's handler turns ``wait`` into Retry-After


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus model validation errors as 400 with field messages,
    deletes blocked by protected references as 409 and database faults as 503
    (``core/outages.py``). Every error body is JSON."""
    if outages.is_database_fault(exc):
        request = context.get("request")
        outages.log(f"API {getattr(request, 'path', '?')[:200]}", exc)
        exc = DatabaseUnavailable()
    elif isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            detail: Any = {
                (k if k != "__all__" else "non_field_errors"): v for k, v in exc.message_dict.items()
            }
        else:
            detail = {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, ProtectedError | RestrictedError):
        names = sorted(
            {
                str(o)
                for o in list(
                    exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
                )[:5]
            }
        )
        exc = Conflict(f"Still referenced by {', '.join(names)}; remove those first.")
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, exceptions.Throttled) and str(exc.detail).startswith(
        str(exceptions.Throttled.default_detail)
    ):
        # DRF's own throttle check: the only throttle class there is the write rate.
        wait = getattr(exc, "wait", None)  # set by Throttled.__init__ (the stubs do not declare it)
        exc = exceptions.Throttled(wait, detail=write_throttle.refusal(wait))
    return drf_exception_handler(exc, context)


@contextmanager
def api_actor(request: Request) -> Iterator[None]:
    """Attribute audited changes to the API caller (token requests skip the session middleware)."""
    user = request.user if request.user.is_authenticated else None
    with acting_as(user, "api"):
        yield


def etag_for(obj: Model) -> str:
    """A strong ETag from the object's ``updated_at``."""
    stamp = obj.updated_at.isoformat()  # type: ignore[attr-defined]
    return f'"{stamp}"'


def check_not_stale(request: Request, current: Model) -> None:
    """409 when the client's ``If-Match`` ETag or ``updated_at`` in the body is not the current one.

    Sending neither is allowed (last write wins), so simple scripts keep working.
    """
    current_tag = etag_for(current)
    if_match = request.headers.get("If-Match")
    if if_match and if_match.strip() != "*":
        tags = [t.strip().removeprefix("W/") for t in if_match.split(",")]
        if current_tag not in tags:
            raise Conflict(
                f"{current} was changed since you read it (If-Match {if_match.strip()} is not the current "
                f"ETag {current_tag}); fetch it again and retry."
            )
    sent = request.data.get("updated_at") if hasattr(request.data, "get") else None
    if sent not in (None, ""):
        from django.utils.dateparse import parse_datetime

        try:
            parsed = parse_datetime(str(sent))
        except ValueError:
            parsed = None
        if parsed is None:
            raise exceptions.ValidationError({"updated_at": ["Must be an ISO 8601 timestamp."]})
        if parsed != current.updated_at:  # type: ignore[attr-defined]
            raise Conflict(
                f"{current} was changed at {current.updated_at.isoformat()} "  # type: ignore[attr-defined]
                f"after the version you read ({sent}); fetch it again and retry."
            )


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


def max_body_bytes() -> int:
    """The largest API request body: Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB by default).

    DRF's parsers read ``request.stream`` directly, which skips Django's own check, so
    every parser here applies it itself."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return int(limit) if limit is not None else 2_621_440


def read_body(stream: Any, parser_context: Any) -> bytes:
    """The body, reading at most the limit (+1 byte to know it is over): 413 past it.

    A declared Content-Length over the limit is refused before reading anything."""
    if stream is None:
        return b""
    limit = max_body_bytes()
    request = (parser_context or {}).get("request")
    declared = request.META.get("CONTENT_LENGTH") if request is not None else None
    too_large = PayloadTooLarge(f"The request body is larger than the limit of {limit} bytes.")
    try:
        if declared and int(declared) > limit:
            raise too_large
    except ValueError:
        pass  # a malformed Content-Length: the bounded read below still applies
    data: bytes = stream.read(limit + 1)
    if len(data) > limit:
        raise too_large
    return data


class BoundedJSONParser(BaseParser):
    """JSON with the body limit as a 413 and nesting too deep for Python's decoder as a 400.

    Not a subclass of DRF's ``JSONParser``: DRF hands that one ``request.body``, read whole
    (Django's own limit then answers a bare 400)."""

    media_type = "application/json"
    renderer_class = JSONRenderer

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = read_body(stream, parser_context)
        try:
            return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - the document is nested too deeply.") from None
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _TextParser(BaseParser):
    """Hands the request body to the view as text (YAML documents, manifests)."""

    # DRF lets a parser return any data; the stubs narrow it to a mapping.
    def parse(  # type: ignore[override]
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> str:
        try:
            return read_body(stream, parser_context).decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.ParseError("The body must be UTF-8 text.") from None


class YamlTextParser(_TextParser):
    media_type = "application/yaml"


class LegacyYamlTextParser(_TextParser):
    media_type = "application/x-yaml"


class TextYamlParser(_TextParser):
    media_type = "text/yaml"


class PlainTextParser(_TextParser):
    media_type = "text/plain"


class JsonTextParser(_TextParser):
    """JSON is YAML too: the view parses it with the same code."""

    media_type = "application/json"


TEXT_PARSERS = [YamlTextParser, LegacyYamlTextParser, TextYamlParser, PlainTextParser]


def body_text(request: Request) -> str:
    """The body parsed by one of the text parsers (a dict means JSON sent to a JSON parser)."""
    data = request.data
    if isinstance(data, str):
        return data
    if not data:  # no body at all: DRF skips the parser
        return ""
    raise exceptions.ParseError("Send the document as YAML (Content-Type: application/yaml) or JSON.")
