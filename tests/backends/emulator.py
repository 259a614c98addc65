"""kmock's Kubernetes emulator, plus the API-server behaviour it lacks.

kmock 0.8's `KubernetesEmulator` stores objects and serves list, watch,
fetch, create, patch and delete over real HTTP. Reading its source
(`kmock/_internal/k8s.py`, `parsing.py`) shows four gaps this subclass fills,
each the way the real API server behaves:

1. No resource versions: lists answer `resourceVersion: "..."` and objects get
   none. Here every write stamps a increasing `metadata.resourceVersion` (and a
   `uid` and `creationTimestamp` on create), and lists report the current one.
2. Watches ignore `resourceVersion` and `timeoutSeconds`: they replay every
   object as ADDED and then never end. Here a watch streams the recorded
   changes newer than the requested version, answers an ERROR 410 Expired for
   a version older than `compacted_below`, and then closes the window at once
   (a real server holds it open up to timeoutSeconds; the client treats a
   closed window the same way, and the tests need not sleep).
3. Field and label selectors are ignored. Here equality selectors
   (`a.b=c`, `k=v`, comma-joined) are honoured on list and watch.
4. POST on the pods/binding and pods/eviction subresources is not a known
   action (it falls through to "404 Endpoint Not Found"). Here binding sets
   spec.nodeName and copies the Binding's annotations onto the pod (as the
   API server does), answering 404 for a missing pod and 409 for a bound pod
   or a uid mismatch; eviction marks the pod with deletionTimestamp (graceful
   deletion) and answers 404 for a missing pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums, references, rendering

PODS = kmock.resource("", "v1", "pods")


@attrs.define(kw_only=True)
class KubeApiEmulator(kmock.KubernetesEmulator):
    compacted_below: int = 0
    # (method, URL path) -> HTTP status to answer once, for faults a real server
    # will not produce on demand (a 500 on one bind, a 503 on one event).
    faults: dict[tuple[str, str], int] = attrs.field(factory=dict)
    _version: int = attrs.field(default=0, init=False)
    # (resourceVersion, resource, event type, object) for every change, oldest first.
    _changes: list[tuple[int, references.resource, str, dict[str, Any]]] = attrs.field(
        factory=list, init=False
    )

    @property
    def version(self) -> int:
        return self._version

    @property
    def request_log(self) -> list[rendering.Request]:
        return list(self)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        fault = self.faults.pop((str(request.method.value).upper(), request.url.path), None)
        if fault is not None:
            raise kmock.KubernetesError(fault, "InternalError", f"injected fault {fault}")
        if request.resource == PODS and request.method == enums.method.POST and request.subresource:
            if request.subresource == "binding":
                return await self._bind(request)
            if request.subresource == "eviction":
                return await self._evict(request)
        if request.resource is None or request.subresource:
            return await super()._handle(request)
        if request.action in (enums.action.CREATE, enums.action.UPDATE) and isinstance(request.data, dict):
            self._stamp(request.data, created=request.action == enums.action.CREATE)
        gone = self._current(request) if request.action == enums.action.DELETE else None
        response = await super()._handle(request)
        if request.action == enums.action.CREATE:
            self._record(request.resource, "ADDED", self._stored(request))
        elif request.action == enums.action.UPDATE:
            self._record(request.resource, "MODIFIED", self._stored(request))
        elif gone is not None:
            self._version += 1
            gone["metadata"]["resourceVersion"] = str(self._version)
            self._record(request.resource, "DELETED", gone)
        return response

    # ----- resource versions and the change log ----------------------------

    def _stamp(self, data: dict[str, Any], created: bool) -> None:
        self._version += 1
        meta = data.setdefault("metadata", {})
        meta["resourceVersion"] = str(self._version)
        if created:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())

    def _record(self, resource: references.resource, kind: str, raw: dict[str, Any] | None) -> None:
        if raw is not None:
            self._changes.append((self._version, resource, kind, copy.deepcopy(raw)))

    def _key(self, request: rendering.Request) -> tuple[Any, str | None, str]:
        data = request.data if isinstance(request.data, dict) else {}
        meta = data.get("metadata") or {}
        namespace = request.namespace or meta.get("namespace")
        return (request.resource, namespace, request.name or meta.get("name") or "")

    def _stored(self, request: rendering.Request) -> dict[str, Any] | None:
        key = self._key(request)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return dict(self.objects[key].raw)

    def _current(self, request: rendering.Request) -> dict[str, Any] | None:
        stored = self._stored(request)
        return copy.deepcopy(stored) if stored is not None else None

    # ----- list and watch ---------------------------------------------------

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        items = [
            raw
            for (resource, namespace, _), obj in self.objects.items()
            if not obj.deleted and resource == request.resource
            for raw in [dict(obj.raw)]
            if _in_scope(request, namespace, raw)
        ]
        return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": str(self._version)},
                "items": items}

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # start the stream even when there is nothing to send
        since = int(request.params.get("resourceVersion") or 0)
        if since < self.compacted_below:
            yield {"type": "ERROR", "object": _status(410, "Expired", f"too old resource version: {since}")}
            return
        for version, resource, kind, raw in list(self._changes):
            namespace = (raw.get("metadata") or {}).get("namespace")
            if version > since and resource == request.resource and _in_scope(request, namespace, raw):
                yield {"type": kind, "object": raw}

    # ----- subresources -----------------------------------------------------

    async def _bind(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        pod = self._pod(request)
        binding = request.data or {}
        uid = (binding.get("metadata") or {}).get("uid")
        node_name = pod.get("spec", {}).get("nodeName")
        if uid and uid != pod["metadata"].get("uid"):
            raise kmock.KubernetesError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
        if node_name:
            message = (f'Operation cannot be fulfilled on pods/binding "{request.name}": '
                       f'pod {request.name} is already assigned to node "{node_name}"')
            raise kmock.KubernetesError(409, "Conflict", message)
        annotations = (binding.get("metadata") or {}).get("annotations") or {}
        self._patch_pod(request, {"spec": {"nodeName": binding["target"]["name"]},
                                  "metadata": {"annotations": annotations}})
        return aiohttp.web.json_response(_status(201, "", ""), status=201)

    async def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        self._pod(request)
        self._patch_pod(request, {"metadata": {"deletionTimestamp": _now()}})
        return aiohttp.web.json_response(_status(201, "", ""), status=201)

    def _pod(self, request: rendering.Request) -> dict[str, Any]:
        key = (PODS, request.namespace, request.name or "")
        if key not in self.objects or self.objects[key].deleted:
            raise kmock.KubernetesError(404, "NotFound", f'pods "{request.name}" not found')
        return dict(self.objects[key].raw)

    def _patch_pod(self, request: rendering.Request, patch: dict[str, Any]) -> None:
        self._version += 1
        patch.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        obj = self.objects[PODS, request.namespace, request.name or ""]
        obj.patch(patch)
        self._record(PODS, "MODIFIED", dict(obj.raw))


def _in_scope(request: rendering.Request, namespace: str | None, raw: dict[str, Any]) -> bool:
    if request.namespace is not None and namespace != request.namespace:
        return False
    labels = (raw.get("metadata") or {}).get("labels") or {}
    for term in _terms(request.params.get("labelSelector")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    for term in _terms(request.params.get("fieldSelector")):
        path, _, value = term.partition("=")
        found: Any = raw
        for part in path.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if (found or "") != value:
            return False
    return True


def _terms(selector: str | None) -> list[str]:
    return [term for term in (selector or "").split(",") if term]


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": "Success" if code < 400 else "Failure", "code": code, "reason": reason,
            "message": message}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.contextmanager
def running_emulator() -> Iterator[tuple[KubeApiEmulator, str]]:
    """Serve the emulator on a local port from its own event-loop thread.

    The kubernetes client is synchronous, so the asyncio server cannot share
    the test's thread.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    emulator = KubeApiEmulator()
    server = kmock.Server(emulator)

    async def start() -> None:
        await emulator.__aenter__()
        await server.__aenter__()

    async def stop() -> None:
        await server.__aexit__(None, None, None)
        await emulator.__aexit__(None, None, None)

    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    try:
        yield emulator, str(server.url).rstrip("/")
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
