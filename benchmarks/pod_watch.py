"""One namespace's pod watch in a thread, shared by the KWOK benchmarks (``kwok_latency.py``,
``kwok_throughput.py``): each subclass says what it records of an event (``seen``).

Events stay plain JSON (no client models): the watch runs beside the portal on the same 2 cores,
and a measuring watch must cost less than what it measures. A compacted resource version (410)
relists from now; any other API error stops the watch and is kept in ``error``."""

from __future__ import annotations

import json
import threading
import time
from typing import Any


class PodWatch(threading.Thread):
    """Streams the namespace's pod events to ``seen`` until ``stop`` is set."""

    def __init__(self, api_client: Any, namespace: str, timeout_s: int, name: str | None = None) -> None:
        super().__init__(daemon=True, name=name)
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.timeout_s = timeout_s  # of each watch request, then it is opened again
        self.stop = threading.Event()
        self.error: str | None = None

    def seen(self, kind: str, name: str, pod: dict[str, Any], now: float) -> None:
        """One ADDED, MODIFIED or DELETED event (``now``: ``time.monotonic()`` at its arrival)."""
        raise NotImplementedError

    def _latest(self) -> str:
        response = self.core.list_namespaced_pod(self.namespace, limit=1, _preload_content=False)
        return str(json.loads(response.data)["metadata"]["resourceVersion"])

    def run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        rv = self._latest()
        while not self.stop.is_set():
            w = watch.Watch(return_type="object")
            try:
                for ev in w.stream(self.core.list_namespaced_pod, self.namespace, resource_version=rv,
                                   timeout_seconds=self.timeout_s, allow_watch_bookmarks=True):  # fmt: skip
                    now = time.monotonic()
                    pod = ev["raw_object"]
                    rv = (pod.get("metadata") or {}).get("resourceVersion", rv)
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.seen(ev["type"], pod["metadata"]["name"], pod, now)
                    if self.stop.is_set():
                        break
            except ApiException as error:
                if error.status == 410:  # compacted: relist from now
                    rv = self._latest()
                else:
                    self.error = str(error)
                    return
