"""Fixtures for the scheduling loop: a simulated clock and a cycle runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.conf import settings

from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.lock import LOCK_NAME

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def free_cycle_lock() -> Iterator[None]:
    """No test starts or ends with the cycle lock held."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(LOCK_NAME)
    yield
    client.delete(LOCK_NAME)
    client.close()


class Loop:
    """Runs cycles at simulated times: ``loop.run(seconds=5)`` advances the clock and runs one."""

    def __init__(self) -> None:
        self.now = T0

    def run(self, seconds: float = 0, **kwargs: object) -> SchedulingCycle:
        self.now += timedelta(seconds=seconds)
        return run_scheduling_cycle(now=self.now, **kwargs)  # type: ignore[arg-type]

    def run_many(self, count: int, every: float = 5) -> list[SchedulingCycle]:
        return [self.run(every) for _ in range(count)]


@pytest.fixture
def loop() -> Loop:
    return Loop()


@pytest.fixture
def at() -> Callable[[float], datetime]:
    return lambda seconds: T0 + timedelta(seconds=seconds)
