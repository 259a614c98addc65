"""A minimal JSON client for the portal API over urllib, authenticated with a token."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any


class ApiError(Exception):
    """The API answered with an error status; ``message`` is its explanation."""

    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(f"HTTP {status}: {message}")


def _explain(body: Any) -> str:
    if isinstance(body, dict):
        if "detail" in body and isinstance(body["detail"], str):
            return body["detail"]
        return "; ".join(
            f"{key}: {' '.join(map(str, value)) if isinstance(value, list) else value}"
            for key, value in body.items()
        )
    return str(body)


class Client:
    def __init__(self, base_url: str, token: str, timeout: float = 30) -> None:
        self.base = base_url.rstrip("/") + "/api/v1/"
        self.token, self.timeout = token, timeout

    def request(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: bytes | None = None,
        content_type: str = "application/json", headers: dict[str, str] | None = None,
    ) -> Any:  # fmt: skip
        url = urllib.parse.urljoin(self.base, path.lstrip("/"))
        if params:
            url += "?" + urllib.parse.urlencode(
                {k: v for k, v in params.items() if v not in (None, "")}, doseq=True
            )
        request = urllib.request.Request(url, data=body, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = _explain(json.loads(raw))
            except ValueError:
                message = raw.decode("utf-8", "replace")[:300] or exc.reason
            raise ApiError(exc.code, message) from None
        except urllib.error.URLError as exc:
            raise ApiError(0, f"cannot reach {self.base}: {exc.reason}") from None
        return json.loads(raw) if raw else None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: bytes | None = None, content_type: str = "application/json") -> Any:
        return self.request("POST", path, body=body, content_type=content_type)

    def submit(self, path: str, body: bytes, content_type: str, attempts: int = 3, wait: float = 1.0) -> Any:
        """POST a submission with an Idempotency-Key, retrying when the answer is lost.

        A connection error or a 5xx may come after the server saved the job; the retry
        carries the same key, so the server returns that job instead of a second one."""
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        for attempt in range(1, attempts + 1):
            try:
                return self.request("POST", path, body=body, content_type=content_type, headers=headers)
            except ApiError as exc:
                if attempt == attempts or not (exc.status == 0 or exc.status >= 500):
                    raise
                time.sleep(wait * attempt)
        raise AssertionError("unreachable")

    def pages(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every row of a paginated list."""
        page = 1
        while True:
            data = self.get(path, page=page, page_size=500, **params)
            yield from data["results"]
            if not data.get("next"):
                return
            page += 1
