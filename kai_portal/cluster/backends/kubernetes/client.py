"""The Kubernetes API client: how it is loaded, how lists and watches are read, how a write is made.

KAI's scheduler keeps its cluster view in informers (list once, then watch); ``Lister`` is that
plumbing for plain dicts: ``list_all`` pages through a list, ``sync`` resumes a watch from the last
resourceVersion (a 410 Gone re-lists). Every component of this package (the cluster cache, the
Queue objects, GPU sharing) reads through one. ``Caller`` makes one write, caught on its own, and
refuses the cycle's writes while the leader-election guard says this replica may not write.

Raw responses: with ``_preload_content=False`` the client returns urllib3's response unread, and
urllib3 gives a connection back to its pool only once the body has been read. A caller that drops
such a response unread leaves the connection to the garbage collector, and the next call opens a
new one: a TCP and TLS handshake per call, on both sides (benchmarks/kwok-throughput.md: before
this, half of each bind's and each event's client time was handshakes, and the API server paid its
own share). Every write whose answer we do not need goes through ``release``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from ..base import OperationResult

LIST_PAGE_SIZE = 500
# The field manager of every object write (what ``metadata.managedFields`` names as the writer).
# Not KAI's component names (podgrouper, binder, queuecontroller...): a user who reads
# managedFields to learn who wrote a field must find the portal, not a KAI component that does
# not run; and not the Python client's default ("OpenAPI-Generator"), which names no one.
FIELD_MANAGER = "kai-portal"
# The writes of a scheduling cycle: only the leader makes them (submit and cancel are the users').
CYCLE_WRITES = frozenset(
    {"bind", "evict", "event", "condition", "podgroup", "podgroup-status", "queue-status"}
)
# Errors that mean "this one call failed", as opposed to a bug in our code.
CALL_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


def release(response: Any) -> None:
    """Read what is left of ``response`` and give its connection back to the pool.

    Anything that is not a raw urllib3 response (a deserialized model, None) is left alone.
    """
    read = getattr(response, "read", None)
    if read is None:
        return
    read()
    release_conn = getattr(response, "release_conn", None)
    if release_conn is not None:
        release_conn()  # a no-op when the read already gave the connection back


def load_api_client() -> client.ApiClient:
    """In-cluster config when running in a pod, else the kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


class Lister:
    """Paged lists and resumable watches, returning plain dicts (KAI's informers, without the models)."""

    def __init__(self, watch_timeout_seconds: int = 1) -> None:
        self.watch_timeout_seconds = watch_timeout_seconds

    def list_all(self, list_call: Callable[..., Any], **selectors: str) -> tuple[list[Any], str | None]:
        """Page through a list; the first page's resourceVersion is the snapshot's."""
        items: list[Any] = []
        token: str | None = None
        resource_version: str | None = None
        while True:
            response = list_call(limit=LIST_PAGE_SIZE, _continue=token, _preload_content=False, **selectors)
            page = json.loads(response.data)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            resource_version = resource_version or metadata.get("resourceVersion")
            token = metadata.get("continue")
            if not token:
                return items, resource_version

    def sync(
        self,
        resource_version: str | None,
        relist: Callable[[], str | None],
        list_call: Callable[..., Any],
        apply_event: Callable[[str, dict[str, Any]], object],
        window: float | None = None,
        **selectors: str,
    ) -> str | None:
        """Re-list when there is no version to resume from (or it was compacted), else watch from it."""
        if resource_version is None:
            return relist()
        try:
            return self.watch(resource_version, list_call, apply_event, window, **selectors)
        except ApiException as error:
            if error.status == 410:  # compacted: our version is too old to resume from
                return relist()
            raise

    def watch(
        self,
        resource_version: str,
        list_call: Callable[..., Any],
        apply_event: Callable[[str, dict[str, Any]], object],
        window: float | None = None,
        **selectors: str,
    ) -> str:
        """Apply the events since ``resource_version``; return the last version seen.

        ``window`` (seconds) ends the watch once the server has been quiet that long
        instead of after the server's own timeout: the events since our version come at
        once, so rarely changing objects cost a cycle a fraction of a second, not one.
        """
        # return_type "object" keeps events as plain dicts while the client still
        # tracks resource versions and turns ERROR events into ApiException.
        watcher = watch.Watch(return_type="object")
        stream = watcher.stream(
            list_call,
            resource_version=resource_version,
            timeout_seconds=self.watch_timeout_seconds,
            allow_watch_bookmarks=True,
            # A hung connection must not hang the cycle; the server closes first normally.
            _request_timeout=(5, window if window is not None else self.watch_timeout_seconds + 5),
            **selectors,
        )
        try:
            for event in stream:
                raw = event["raw_object"]
                resource_version = raw.get("metadata", {}).get("resourceVersion") or resource_version
                if event["type"] != "BOOKMARK":
                    apply_event(event["type"], raw)
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
            # The window ended without a clean close; everything applied so far is
            # valid and the next cycle resumes from the last version we saw.
            pass
        return resource_version


class Caller:
    """One write to the API server, caught on its own, behind the leader-election guard.

    ``write_guard`` (cluster/leader_election.py) returns None while this replica may write the
    scheduling decisions, else why not; it is checked before each write a cycle makes."""

    def __init__(self) -> None:
        self.write_guard: Callable[[], str | None] | None = None

    def call(self, operation: str, namespace: str, name: str, call: Callable[[], Any]) -> OperationResult:
        refusal = self.write_guard() if self.write_guard and operation in CYCLE_WRITES else None
        if refusal:  # fail closed: a replica that lost the lease writes nothing more
            return OperationResult(operation, namespace, name, ok=False, error=refusal)
        try:
            release(call())  # read the answer, or its connection is not reused
        except CALL_ERRORS as error:
            return failure(operation, namespace, name, error)
        return OperationResult(operation, namespace, name, ok=True)


def failure(operation: str, namespace: str, name: str, error: Exception) -> OperationResult:
    status = error.status if isinstance(error, ApiException) else None
    return OperationResult(operation, namespace, name, ok=False, error=error_text(error), status_code=status)


def error_text(error: Exception) -> str:
    """The API's own message when there is one (a Status body), else the exception."""
    if isinstance(error, ApiException):
        try:
            message = json.loads(error.body or "").get("message")
        except (ValueError, AttributeError):
            message = None
        return f"{error.status} {error.reason}: {message}" if message else f"{error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"


def concurrently(limit: int, call: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``call`` over ``items``, at most ``limit`` at once; results in the items' order."""
    if limit <= 1 or len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(limit, len(items))) as pool:
        return list(pool.map(call, items))


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
