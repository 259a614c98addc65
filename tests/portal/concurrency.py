"""Requests made at the same instant from several threads, each on its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def at_once(count: int, request: Callable[[int], object]) -> list:
    """Run ``request(i)`` for i in 0..count-1 in threads released together by a barrier; the
    results in order. Each thread closes its connection (Django opens one per thread)."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = request(i)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results
