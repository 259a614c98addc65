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

The hot writes (``HotWrites``: a bind, an Event, a pod's status condition, several per bound pod)
skip the generated methods around the client's ApiClient: see there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

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
        watcher = RawWatch(return_type="object")
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


class RawWatch(watch.Watch):
    """``watch.Watch`` whose events stay the dicts parsed from the stream: the client still
    tracks resource versions and turns ERROR events into ``ApiException``.

    The client's own ``unmarshal_event`` parses each line, then for return type "object" dumps
    the object back to JSON and parses it again (``ApiClient.deserialize``) to hand back the same
    dict: two thirds of the JSON work of a watch, about 0.7 ms per bound pod's events at 1,000
    pods a cycle. Here each line is parsed once, and the version is read as the client reads it."""

    def unmarshal_event(self, data: str, return_type: Any) -> dict[str, Any] | None:
        if not data or data.isspace():
            return None
        try:
            event: dict[str, Any] = json.loads(data)
        except json.JSONDecodeError:
            return None
        event["raw_object"] = obj = event["object"]
        if event["type"] != "ERROR" and isinstance(obj, dict):
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version is not None:
                self.resource_version = version
        return event


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


JSON = "application/json"
# What the generated patch methods send for an object body (the REST client turns their
# json-patch default into this for anything but a list of operations).
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
AUTH_SETTINGS = ["BearerToken"]  # every generated core/v1 method's


class HotWrites:
    """The writes a cycle makes per bound pod (the bind, its Scheduled and Bound Events, its
    PodBound condition) and per pending pod, sent through the client's own ``ApiClient`` (its
    configuration, default headers, authentication with token refresh) and REST client (its
    urllib3 pool, TLS, timeouts), with plain dict bodies, without the generated methods around them.

    Those methods validate every argument with pydantic (``validate_call``), build and re-serialise
    model objects (``sanitize_for_serialization``) and assemble the request in generic code; on a
    cycle of thousands of binds that was about half of the portal's CPU per bound pod
    (benchmarks/kwok-throughput.md). The request on the wire is the one the generated method
    sends (method, path, query, Accept, the same JSON), but for a Content-Type stated on every
    write: the generated create methods leave it out and the API server assumes JSON.
    A refusal raises the ``ApiException`` (its subclass by status) the generated method raises.
    Answers come back unread, as with ``_preload_content=False``: give them to ``release``."""

    # Each write and the CoreV1Api method whose request it sends: the RBAC rules are derived
    # from the client calls in the code (tests/deploy/test_helm_chart.py), and read these too.
    GENERATED = {
        "bind": "create_namespaced_pod_binding",
        "create_event": "create_namespaced_event",
        "patch_event": "patch_namespaced_event",
        "patch_pod_status": "patch_namespaced_pod_status",
    }

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    def bind(self, namespace: str, pod: str, body: dict[str, Any]) -> Any:
        """POST pods/<pod>/binding (``create_namespaced_pod_binding``)."""
        path = f"/api/v1/namespaces/{self._segment(namespace)}/pods/{self._segment(pod)}/binding"
        return self.request("POST", path, body, [("fieldManager", FIELD_MANAGER)])

    def create_event(self, namespace: str, body: dict[str, Any]) -> Any:
        """POST a core/v1 Event (``create_namespaced_event``)."""
        return self.request("POST", f"/api/v1/namespaces/{self._segment(namespace)}/events", body)

    def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> Any:
        """A strategic merge patch of an Event (``patch_namespaced_event``)."""
        path = f"/api/v1/namespaces/{self._segment(namespace)}/events/{self._segment(name)}"
        return self.request("PATCH", path, body, content_type=STRATEGIC_MERGE_PATCH)

    def patch_pod_status(self, namespace: str, pod: str, body: dict[str, Any]) -> Any:
        """A strategic merge patch of pods/<pod>/status (``patch_namespaced_pod_status``)."""
        path = f"/api/v1/namespaces/{self._segment(namespace)}/pods/{self._segment(pod)}/status"
        query = [("fieldManager", FIELD_MANAGER)]
        return self.request("PATCH", path, body, query, content_type=STRATEGIC_MERGE_PATCH)

    def _segment(self, value: str) -> str:
        """A path parameter, quoted as the generated methods quote it."""
        return quote(value, safe=self.api_client.configuration.safe_chars_for_path_param)

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any],
        query: list[tuple[str, str]] | None = None,
        content_type: str = JSON,
    ) -> Any:
        """One request as ``ApiClient.param_serialize`` and ``call_api`` make it; the urllib3
        response, unread; ``ApiException`` for an answer outside 2xx (its body read)."""
        api = self.api_client
        headers = {"Accept": JSON, "Content-Type": content_type}
        headers.update(api.default_headers)  # the User-Agent, and any the caller configured
        if api.cookie:
            headers["Cookie"] = api.cookie
        queries = list(query or ())
        api.update_params_for_auth(headers, queries, AUTH_SETTINGS, path, method, body)
        url = api.configuration.host + path
        if queries:
            url += "?" + urlencode(queries)
        response = api.rest_client.request(method, url, headers=headers, body=body)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response


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
