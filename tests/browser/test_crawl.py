"""Every page a person can reach by clicking, on the demo data `make run` seeds.

A new user's first minutes: sign in, then follow the links. The crawl visits every same-site
link reachable from the overview (bounded), as a portal admin and as a team member, after a
few scheduling cycles and with the live loop running (as `make run` has it), and fails on any
answer other than 200, any request that failed in the
browser (a 404 for a script or icon, a 500 from an htmx fragment) and any console error.
It runs on PostgreSQL and, in `make test`'s SQLite tier, on `make run`'s own database engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.browser.conftest import LiveLoop, failed_request, run_cycle, sign_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("demo_passwords"),
]

# Links that change state or leave the portal's pages; everything else is followed.
SKIP_PARTS = ("/logout", "/admin/", "/static/", "/api/", "cancel", "delete", ".csv", "download")
MAX_PAGES = 45


@pytest.fixture
def demo_world(transactional_db: None) -> Iterator[LiveLoop]:
    """`make run`'s world: the demo data, a few cycles, then the loop running as the user browses."""
    call_command("seed_demo", stdout=StringIO())
    start = timezone.now()
    for i in range(3):
        run_cycle(now=start + timedelta(seconds=5 * i))
    loop = LiveLoop(interval=1.0).start()
    yield loop
    loop.stop()
    assert not loop.errors, f"scheduling cycles failed: {loop.errors!r}"


def _crawl(page: Any, base: str) -> tuple[list[str], list[str]]:
    """Breadth-first over same-site links; returns (pages visited, problems found)."""
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type} on {page.url}: {m.text}") if m.type == "error" else None,
    )
    page.on("requestfailed", lambda r: problems.append(said) if (said := failed_request(r)) else None)
    page.on("response", lambda r: problems.append(f"{r.status} for {r.url}") if r.status >= 400 else None)
    host = urlsplit(base).netloc
    queue, seen = ["/cluster/"], set[str]()
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        response = page.goto(path)
        if response is None or response.status != 200:
            problems.append(f"{path} answered {response.status if response else 'nothing'}")
            continue
        page.wait_for_load_state("networkidle")
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))"):
            url = urlsplit(urljoin(base + path, href))
            if url.netloc != host or any(part in url.path for part in SKIP_PARTS):
                continue
            target = url.path + (f"?{url.query}" if url.query else "")
            if target not in seen and target not in queue:
                queue.append(target)
    return sorted(seen), problems


@pytest.mark.parametrize("username", ["admin", "vision-dev1"])
def test_every_linked_page_loads_without_errors(
    page: Any, live_server: Any, demo_world: LiveLoop, username: str
) -> None:
    sign_in(page, username, "admin" if username == "admin" else "demo")
    visited, problems = _crawl(page, live_server.url)
    assert not problems, "\n".join(problems)
    # The crawl really walked the portal: the queue tree, a queue's page and a job's page.
    assert "/queues/" in visited
    assert any(p.startswith("/queues/") and p.count("/") == 3 and "?" not in p for p in visited), visited
    assert any(p.startswith("/jobs/") and len(p) > 30 for p in visited), visited


def test_admin_saves_every_demo_queue_from_its_edit_page(page: Any, demo_world: LiveLoop) -> None:
    """The demo has a department tree in each node pool; an admin edits each queue's over-quota
    weight in the browser and saves. The edit page once left out the pool field, so every
    top-level queue outside the default pool (h100, inference, sandbox) could not be saved."""
    from kai_portal.queues.models import Queue

    pools = dict(Queue.objects.values_list("name", "node_pool__name"))
    assert {"default", "h100", "inference"} <= set(pools.values())
    sign_in(page, "admin", "admin")
    page.goto("/queues/")
    names = page.eval_on_selector_all("tr[data-queue]", "rows => rows.map(r => r.dataset.queue)")
    assert sorted(names) == sorted(pools)
    for name in names:
        page.goto(f"/queues/{name}/")
        page.click("text=Edit quotas")
        page.wait_for_url(f"**/queues/{name}/edit/")
        page.fill("#id_gpu_over_quota_weight", "2.5")
        page.click("button:has-text('Save changes')")
        page.wait_for_url(f"**/queues/{name}/")
        assert f"Queue {name} saved" in page.inner_text(".messages"), name
    rows = Queue.objects.select_related("node_pool")
    saved = {q.name: (q.node_pool.name, q.gpu_over_quota_weight) for q in rows}
    assert saved == {name: (pool, 2.5) for name, pool in pools.items()}
