"""Watches kept open in a background thread (client-go's reflector), feeding a cache (issue 29).

An ``Informer`` lists a resource once, then watches it from the list's resourceVersion without
end: each watch request lasts ``WATCH_SECONDS`` on the server and the next resumes where it
stopped, so no event is lost between them. A 410 Gone (the version was compacted away) re-lists;
any other failure (API server down, a refused call, a missing CRD) is retried after a backoff
that doubles up to ``BACKOFF_MAX`` and resumes from the last version seen, re-listing when there
is none. The scheduling cycle never waits on a watch: it reads what the informers have applied.

Every list and every event is applied under the caller's ``lock`` (the informers of one cache
share it, so a reader holding it sees one consistent state). The ``apply`` callback returns
whether the event is one a scheduling cycle should act on soon (a new pending pod, freed room, a
node or a setting changed); then ``on_change`` is called with a few words saying what changed,
outside the lock. A re-list always counts as a change: events may have been missed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from .client import CALL_ERRORS, error_text

logger = logging.getLogger(__name__)

# The server ends each watch request after this long (the next resumes from the last version).
WATCH_SECONDS = 240
BACKOFF_START, BACKOFF_MAX = 0.5, 30.0
# A watch that ends at once with nothing in it (a proxy closing it, say) waits this long before the
# next, so a server that keeps doing so is not asked in a tight loop.
EMPTY_WATCH_PAUSE = 0.5

Relist = Callable[[], "str | None"]
ApplyEvent = Callable[[str, dict[str, Any]], bool]
OnChange = Callable[[str], None]


class Informer:
    """One resource, listed then watched in a daemon thread until ``stop``."""

    def __init__(
        self,
        name: str,
        list_call: Callable[..., Any],
        relist: Relist,
        apply_event: ApplyEvent,
        lock: threading.Lock,
        on_change: OnChange,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.name = name
        self.list_call = list_call
        self.relist = relist
        self.apply_event = apply_event
        self.lock = lock
        self.on_change = on_change
        self.watch_seconds = watch_seconds
        self.resource_version: str | None = None
        # Set once the first list has been applied; ``problem`` says why it has not (or why the
        # watch is failing now), for the cycle's error and the log.
        self.synced = threading.Event()
        self.problem: str | None = None
        self.relists = 0  # lists made (the first and every one after a 410 or a failure)
        self._stopped = threading.Event()
        self._watcher: watch.Watch | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current event (a watch blocked on a quiet resource ends at its timeout;
        the thread is a daemon, so it never holds the process up)."""
        self._stopped.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.stop()
            # The open response, closed under the reading thread so a quiet watch ends now (the
            # client keeps it as ``_resp``; without it the watch ends at its timeout).
            response = getattr(watcher, "_resp", None)
            close = getattr(response, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - a socket already gone is what we wanted
                    logger.debug("closing the watch of %s", self.name, exc_info=True)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (after ``stop``); True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def _run(self) -> None:
        backoff = BACKOFF_START
        while not self._stopped.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                opened = time.monotonic()
                if not self._watch() and time.monotonic() - opened < EMPTY_WATCH_PAUSE:
                    self._stopped.wait(EMPTY_WATCH_PAUSE)
                backoff = BACKOFF_START
            except ApiException as error:
                if error.status == 410:  # compacted: list again, then watch from the new version
                    logger.info("watch of %s: %s; listing again", self.name, error_text(error))
                    self.resource_version = None
                    continue
                backoff = self._failed(error, backoff)
            except CALL_ERRORS as error:
                backoff = self._failed(error, backoff)
            except Exception as error:  # a bug in a parser must not end the watch for good
                logger.exception("watch of %s failed", self.name)
                backoff = self._failed(error, backoff)

    def _list(self) -> None:
        with self.lock:
            self.resource_version = self.relist()
        self.relists += 1
        self.problem = None
        self.synced.set()
        self.on_change(f"{self.name} listed")

    def _watch(self) -> int:
        """One watch request from the last version; returns how many events it carried."""
        # return_type "object" keeps events as plain dicts; the client turns ERROR events into
        # ApiException (a 410 among them).
        self._watcher = watcher = watch.Watch(return_type="object")
        stream = watcher.stream(
            self.list_call,
            resource_version=self.resource_version,
            timeout_seconds=self.watch_seconds,
            allow_watch_bookmarks=True,
            # A connection that hangs past the server's own timeout is dropped and resumed.
            _request_timeout=(10, self.watch_seconds + 30),
        )
        events = 0
        for event in stream:
            events += 1
            raw = event["raw_object"]
            kind = event["type"]
            version = (raw.get("metadata") or {}).get("resourceVersion") or self.resource_version
            if kind == "BOOKMARK":
                self.resource_version = version
                continue
            with self.lock:
                relevant = self.apply_event(kind, raw)
                self.resource_version = version
            if relevant:
                meta = raw.get("metadata") or {}
                where = f"{meta['namespace']}/" if meta.get("namespace") else ""
                self.on_change(f"{self.name} {kind.lower()}: {where}{meta.get('name', '')}")
            if self._stopped.is_set():
                break
        self.problem = None
        return events

    def _failed(self, error: BaseException, backoff: float) -> float:
        if self._stopped.is_set():  # the watch closed by stop(): no failure
            return backoff
        problem = error_text(error) if isinstance(error, Exception) else str(error)
        if problem != self.problem:  # once per distinct problem, not every retry
            logger.warning("watch of %s failed (%s); retrying in %.1f s", self.name, problem, backoff)
        self.problem = problem
        self._stopped.wait(backoff)
        return min(backoff * 2, BACKOFF_MAX)
