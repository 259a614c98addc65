"""A small reader of Prometheus's HTTP query API (``POST /api/v1/query``), with the standard library.

Only instant vector queries are needed (the GPU use reader asks for window averages), so this is
one function, not a client library. Every way a read can go wrong ends in ``PrometheusError``
with a sentence a person can act on: unreachable (refused, DNS, timeout), an HTTP or query
error Prometheus reports, or an answer that is not what the API promises (garbage). The body
read is bounded, so a runaway answer cannot take the worker's memory.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any


class PrometheusError(Exception):
    """A read that gave no usable answer. ``kind`` is ``unreachable``, ``error`` or ``garbage``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels and its value."""

    labels: dict[str, str]
    value: float


def query(base_url: str, promql: str, *, timeout: float, max_bytes: int) -> list[Sample]:
    """Evaluate ``promql`` now; the vector's samples (NaN values dropped: no data, not zero)."""
    url = base_url.rstrip("/") + "/api/v1/query"
    body = urllib.parse.urlencode({"query": promql, "timeout": f"{max(int(timeout * 1000), 100)}ms"}).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    raw = _fetch(request, url, timeout=timeout, max_bytes=max_bytes)
    return _samples(raw, url)


def _fetch(request: urllib.request.Request, url: str, *, timeout: float, max_bytes: int) -> bytes:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) URL from settings)
            raw: bytes = response.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        # Prometheus answers 400/422/503 with a JSON error body: pass its words on.
        detail = _error_text(exc.read(4096)) or exc.reason
        raise PrometheusError("error", f"Prometheus at {url} answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:  # TimeoutError is an OSError
        reason = getattr(exc, "reason", exc)
        if isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError):
            slow = f"Prometheus at {url} did not answer within {timeout:g} s"
            raise PrometheusError("unreachable", slow) from None
        raise PrometheusError("unreachable", f"Prometheus at {url} cannot be reached: {reason}") from None
    if len(raw) > max_bytes:
        raise PrometheusError(
            "error", f"Prometheus at {url} answered more than {max_bytes:,} bytes; the read was abandoned"
        )
    return raw


def _error_text(raw: bytes) -> str:
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:200]
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def _samples(raw: bytes, url: str) -> list[Sample]:
    def garbage(why: str) -> PrometheusError:
        return PrometheusError(
            "garbage", f"Prometheus at {url} sent an answer that is not the query API's: {why}"
        )

    try:
        data: Any = json.loads(raw)
    except ValueError:
        raise garbage("not JSON") from None
    if not isinstance(data, dict):
        raise garbage("not a JSON object")
    if data.get("status") != "success":
        raise PrometheusError("error", f"Prometheus at {url} refused the query: {data.get('error') or data}")
    result = data.get("data")
    if not isinstance(result, dict) or result.get("resultType") != "vector":
        raise garbage("no instant vector in data")
    series = result.get("result")
    if not isinstance(series, list):
        raise garbage("data.result is not a list")
    samples = []
    for item in series:
        try:
            labels, (_, text) = item["metric"], item["value"]
            value = float(text)
        except (KeyError, TypeError, ValueError):
            raise garbage(f"a series is malformed: {str(item)[:120]}") from None
        if not isinstance(labels, dict):
            raise garbage("a series' metric is not an object")
        if value == value:  # NaN: an average over no points is no data
            samples.append(Sample({str(k): str(v) for k, v in labels.items()}, value))
    return samples
