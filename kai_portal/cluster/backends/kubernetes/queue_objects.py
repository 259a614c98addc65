"""KAI's ``Queue`` objects (``scheduling.run.ai/v2``, cluster-scoped) over the Kubernetes API.

Reading follows the Kubernetes backend's nodes: the first ``observe`` lists every Queue object
and keeps the list's resourceVersion, later ones apply a short watch from it (a 410 re-lists);
the list/watch plumbing is the backend's own (``client.Lister``), not a second copy. In the
scheduler process (``start_watch``, issue 29) an informer keeps the watch open in the background
instead and ``observe`` returns what it has applied; every change of an object is a reason for a
cycle (``on_change``).

Writing carries the resourceVersion the portal last read as a precondition (a JSON merge patch
with ``metadata.resourceVersion``; a delete with ``preconditions``), so a change made in the
cluster since is refused by the API server (409) instead of being overwritten. The write errors
are turned into the two exceptions below, whose messages are shown to the user as they are.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .client import CALL_ERRORS, Lister, error_text, release
from .informer import Informer

logger = logging.getLogger(__name__)

GROUP, VERSION, PLURAL, KIND = "scheduling.run.ai", "v2", "queues", "Queue"
MERGE_PATCH = "application/merge-patch+json"
# Writes happen inside a web request: a hung API server must not hang it (connect, read seconds).
WRITE_TIMEOUT = (5, 15)


class QueueObjectConflict(Exception):
    """The object changed (or went) in the cluster since the portal read it; nothing was written."""


class QueueObjectUnavailable(Exception):
    """The API server could not be asked (unreachable, forbidden, no Queue CRD); nothing was written."""


class QueueObjects:
    """The cluster's Queue objects: a list+watch cache for the scheduling cycle, and the writes."""

    def __init__(self, api_client: client.ApiClient, lister: Lister | None = None) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        # The backend's lister when the cycle reads through it (its watch timeout), else our own.
        self.lister = lister or Lister()
        self._objects: dict[str, dict[str, Any]] = {}
        self._resource_version: str | None = None
        self._last_problem: str | None = None
        self._lock = threading.Lock()
        self.informer: Informer | None = None

    # ----- read -----------------------------------------------------------

    def start_watch(self, on_change: Callable[[str], None], api_client: client.ApiClient) -> Informer:
        """Follow the Queue objects in a background thread from now on (``observe`` reads it), on
        ``api_client`` (the watches' own connection pool)."""
        if self.informer is None:
            # The list and the watch on that pool (this process makes no Queue writes; the web does).
            self.custom = client.CustomObjectsApi(api_client)
            self.informer = Informer(
                "queues", self._list_call(), self._relist, self._apply, self._lock, on_change
            )
            self.informer.start()
        return self.informer

    def _list_call(self) -> Callable[..., object]:
        return partial(self.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)

    def _relist(self) -> str | None:
        items, resource_version = self.lister.list_all(self._list_call())
        self._objects = {item["metadata"]["name"]: item for item in items}
        return resource_version

    def observe(self) -> dict[str, dict[str, Any]] | None:
        """Every Queue object by name, or None when they cannot be read this cycle.

        None (a missing CRD, a refused or failed call) means "unknown", never "no queues": the
        caller must then leave the portal's queues alone rather than delete them.
        """
        if self.informer is not None:
            return self._watched()
        try:
            self._resource_version = self.lister.sync(
                self._resource_version, self._relist, self._list_call(), self._apply
            )
        except CALL_ERRORS as error:
            problem = error_text(error)
            if problem != self._last_problem:  # once per distinct problem, not every cycle
                logger.warning("Queue objects (%s/%s) cannot be read: %s", GROUP, VERSION, problem)
            self._last_problem = problem
            self._resource_version = None  # start again with a list
            return None
        self._last_problem = None
        return dict(self._objects)

    def cached(self) -> dict[str, dict[str, Any]]:
        """The Queue objects as the last ``observe`` left them (no call; empty before the first)."""
        with self._lock:
            return dict(self._objects)

    def _watched(self) -> dict[str, dict[str, Any]] | None:
        """The informer's objects; None (unknown) until its list has succeeded, and while a list
        after a failure has not (the informer logs why)."""
        assert self.informer is not None
        if not self.informer.synced.is_set() or self.informer.resource_version is None:
            return None
        with self._lock:
            return dict(self._objects)

    def _apply(self, event_type: str, raw: dict[str, Any]) -> bool:
        name = (raw.get("metadata") or {}).get("name")
        if not name:
            return False
        if event_type == "DELETED":
            return self._objects.pop(name, None) is not None
        before = self._objects.get(name)
        self._objects[name] = raw
        # What the portal reads of a queue; a status written by a controller asks no cycle.
        return before is None or _read_part(before) != _read_part(raw)

    # ----- write ----------------------------------------------------------

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        try:
            response = self.custom.create_cluster_custom_object(
                GROUP, VERSION, PLURAL, body, _preload_content=False, _request_timeout=WRITE_TIMEOUT
            )
        except ApiException as error:
            if error.status == 409:
                raise QueueObjectConflict(
                    f"a Queue object named '{name}' was created in the cluster meanwhile; reload (the "
                    "portal reads it within one scheduling cycle) and edit that queue instead"
                ) from None
            raise QueueObjectUnavailable(_unavailable(name, error)) from None
        except CALL_ERRORS as error:
            raise QueueObjectUnavailable(_unavailable(name, error)) from None
        return _body(response)

    def patch(self, name: str, body: dict[str, Any], since: str) -> dict[str, Any]:
        """A merge patch; ``body.metadata.resourceVersion`` is the precondition (``since`` names it)."""
        try:
            response = self.custom.patch_cluster_custom_object(
                GROUP,
                VERSION,
                PLURAL,
                name,
                body,
                _preload_content=False,
                _content_type=MERGE_PATCH,
                _request_timeout=WRITE_TIMEOUT,
            )  # fmt: skip
        except ApiException as error:
            if error.status in (404, 409):
                raise QueueObjectConflict(_changed(name, since, gone=error.status == 404)) from None
            raise QueueObjectUnavailable(_unavailable(name, error)) from None
        except CALL_ERRORS as error:
            raise QueueObjectUnavailable(_unavailable(name, error)) from None
        return _body(response)

    def delete(self, name: str, uid: str, resource_version: str) -> None:
        """Delete the object if it is still the one the portal read; an object already gone is fine."""
        preconditions = client.V1Preconditions(uid=uid or None, resource_version=resource_version or None)
        try:
            release(self.custom.delete_cluster_custom_object(
                GROUP, VERSION, PLURAL, name, body=client.V1DeleteOptions(preconditions=preconditions),
                _preload_content=False, _request_timeout=WRITE_TIMEOUT,
            ))  # fmt: skip
        except ApiException as error:
            if error.status == 404:
                return
            if error.status == 409:
                raise QueueObjectConflict(_changed(name, resource_version, gone=False)) from None
            raise QueueObjectUnavailable(_unavailable(name, error)) from None
        except CALL_ERRORS as error:
            raise QueueObjectUnavailable(_unavailable(name, error)) from None


def _body(response: Any) -> dict[str, Any]:
    return json.loads(response.data)  # type: ignore[no-any-return]


def _changed(name: str, since: str, *, gone: bool) -> str:
    what = "was deleted" if gone else "changed"
    return (
        f"the Queue object '{name}' {what} in the cluster since the portal read it "
        f"(resourceVersion {since or 'unknown'}); reload to see the cluster's values and edit again. "
        "Nothing was saved."
    )


def _unavailable(name: str, error: Exception) -> str:
    return (
        f"the Queue object '{name}' could not be written to the cluster ({error_text(error)}); "
        "nothing was saved. Try again, or ask an administrator to check the portal's access to the cluster."
    )


def _read_part(obj: dict[str, Any]) -> tuple[Any, Any]:
    return obj.get("spec"), (obj.get("metadata") or {}).get("labels")
