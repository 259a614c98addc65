"""Playwright (sync API) driving Debian's Chromium against pytest-django's live server.

The sync API runs an event loop in this thread, which makes Django refuse ORM
calls from it unless DJANGO_ALLOW_ASYNC_UNSAFE is set; tests set up data and
drive scheduling cycles directly through the ORM between page actions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SCREENSHOTS = Path(__file__).parent / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any, live_server: Any, settings: Any) -> Iterator[Any]:
    """A fresh browser context per test, pointed at the live server over plain HTTP."""
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


def sign_in(page: Any, username: str, password: str = "pw") -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/cluster/")


def failed_request(request: Any) -> str | None:
    """What a failed request says, or None for the one failure a page cannot cause: the browser's
    own favicon fetch, dropped (ERR_ABORTED) when the page navigates before it ends."""
    if request.url.endswith("/favicon.svg") and request.failure == "net::ERR_ABORTED":
        return None
    return f"request failed: {request.url} ({request.failure})"


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def run_cycle(now: Any = None) -> Any:
    """One scheduling cycle on the simulated cluster, as the Celery beat would run it."""
    from kai_portal.scheduling.cycle import run_scheduling_cycle

    return run_scheduling_cycle(now=now)


class LiveLoop:
    """``make run``'s scheduling loop (``manage.py run_scheduler``) in a background thread.

    Cycles run on the wall clock against the simulated cluster, every ``interval`` seconds,
    each followed by the forecast refresh, exactly as the command does; the test drives the
    browser meanwhile. ``wait_cycles(n)`` blocks until n more cycles have finished.
    """

    def __init__(self, interval: float = 0.5) -> None:
        import threading

        self.interval = interval
        self.finished = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="live-scheduling-loop", daemon=True)

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._stop.is_set():
                try:
                    run_cycle()
                except Exception as error:  # recorded; the test fails on it at the end
                    self.errors.append(error)
                with self._changed:
                    self.finished += 1
                    self._changed.notify_all()
                self._stop.wait(self.interval)
        finally:
            connection.close()

    def start(self) -> LiveLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def wait_cycles(self, count: int = 1, timeout: float = 60) -> None:
        with self._changed:
            target = self.finished + count
            if not self._changed.wait_for(lambda: self.finished >= target, timeout=timeout):
                raise TimeoutError(f"the scheduling loop did not finish {count} cycles in {timeout} s")


@pytest.fixture
def live_loop(transactional_db: None) -> Iterator[LiveLoop]:
    """A running scheduling loop; stopped before the database is flushed."""
    loop = LiveLoop().start()
    yield loop
    loop.stop()
    assert not loop.errors, f"scheduling cycles failed: {loop.errors!r}"
def wait_until(page: Any, expression: str, timeout: float = 10.0) -> None:
    """Poll a JavaScript expression until it is truthy.

    ``page.wait_for_function`` evaluates a polled expression with ``eval`` inside the page,
    which the portal's Content-Security-Policy refuses; ``page.evaluate`` is not subject to it.
    """
    import time

    deadline = time.monotonic() + timeout
    while not page.evaluate(f"() => Boolean({expression})"):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        page.wait_for_timeout(100)
