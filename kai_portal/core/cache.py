"""Django's Redis cache, degrading to "nothing cached" while Redis is unreachable.

The cache only holds things that can be recomputed (queue-position forecasts, throttle
counts), so a Redis outage must not turn pages and API calls into 500s: reads miss,
writes are dropped, and one warning per minute says so. Scheduling has its own fallback
for the cycle lock (``scheduling/lock.py``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
_last_warning = 0.0


def _warn(error: Exception) -> None:
    global _last_warning
    if time.monotonic() - _last_warning > 60:
        _last_warning = time.monotonic()
        logger.warning("Redis cache unreachable (%s); serving without the cache", error)


def _degrades(fallback: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Call the method; while Redis is unreachable return ``fallback(*args, **kwargs)`` instead."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except _UNREACHABLE as error:
                _warn(error)
                return fallback(*args, **kwargs)

        return call

    return wrap


def _default(key: Any, default: Any = None, *args: Any, **kwargs: Any) -> Any:
    return default


class DegradingRedisCache(RedisCache):
    get = _degrades(_default)(RedisCache.get)
    get_many = _degrades(lambda *a, **k: {})(RedisCache.get_many)
    has_key = _degrades(lambda *a, **k: False)(RedisCache.has_key)
    set = _degrades(lambda *a, **k: None)(RedisCache.set)
    set_many = _degrades(lambda *a, **k: [])(RedisCache.set_many)
    add = _degrades(lambda *a, **k: False)(RedisCache.add)
    touch = _degrades(lambda *a, **k: False)(RedisCache.touch)
    delete = _degrades(lambda *a, **k: False)(RedisCache.delete)
    delete_many = _degrades(lambda *a, **k: None)(RedisCache.delete_many)
    clear = _degrades(lambda *a, **k: False)(RedisCache.clear)
