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


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def run_cycle(now: Any = None) -> Any:
    """One scheduling cycle on the simulated cluster, as the Celery beat would run it."""
    from kai_portal.scheduling.cycle import run_scheduling_cycle

    return run_scheduling_cycle(now=now)


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
