from __future__ import annotations

from typing import Any

import pytest

from tests.portal import factories


@pytest.fixture
def portal_admin(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def department(db: None) -> Any:
    return factories.queue("dept", gpu_quota=10, cpu_quota=10_000, memory_quota=10_240)


@pytest.fixture
def leaf(department: Any) -> Any:
    return factories.queue("leaf", parent=department, gpu_quota=4, cpu_quota=1_000, memory_quota=1_024)


@pytest.fixture(autouse=True)
def no_token_failures_carried_over() -> Any:
    """Failed-token counts live a minute in the cache: one test's bad tokens must not
    throttle the next test's (every test client is 127.0.0.1, and tests reuse bad secrets)."""
    from django.core.cache import cache
    from redis.exceptions import RedisError

    def forget() -> None:
        client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
        try:
            for key in client.scan_iter(match=cache.make_key("throttle_*")):
                client.delete(key)
        except RedisError:  # a test that stopped Redis: nothing carried over either
            pass

    forget()
    yield
    forget()
