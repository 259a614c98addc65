"""The queue page's usage history: bucketed in the database, on PostgreSQL and on SQLite alike."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from kai_portal.history.models import UsageSample
from kai_portal.web.queues.views import CHART_POINTS, WINDOWS, usage_history


def _sample(queue: Any, at: Any, allocated: int) -> UsageSample:
    return UsageSample.objects.create(
        queue=queue, resource="gpu", sampled_at=at, allocated=Decimal(allocated), requested=Decimal(8),
        deserved=Decimal(2), fair_share=Decimal(3),
    )  # fmt: skip


def test_samples_are_averaged_per_bucket(world: dict[str, Any]) -> None:
    queue = world["queues"]["alpha"]
    now = timezone.now()
    bucket = WINDOWS["hour"] / CHART_POINTS  # 30 s
    # Two samples well inside one bucket, one in a later bucket, one outside the window.
    start = now - WINDOWS["hour"]
    first = start + bucket * 10 + timedelta(seconds=3)
    _sample(queue, first, 2)
    _sample(queue, first + timedelta(seconds=10, microseconds=123_456), 4)
    _sample(queue, start + bucket * 50 + timedelta(seconds=1), 6)
    _sample(queue, start - timedelta(minutes=5), 100)

    # A debug cursor, as under `make run` (DEBUG=1): it formats the SQL with its parameters.
    with CaptureQueriesContext(connection):
        history = usage_history(queue, "gpu", "hour")

    assert history["samples"] == 3
    assert history["series"]["allocated"] == [3.0, 6.0]
    assert history["series"]["fair_share"] == [3.0, 3.0]
    # Each point sits in the middle of its bucket: bucket 10 and bucket 50 after the window start.
    expected = [start + bucket * 10 + bucket / 2, start + bucket * 50 + bucket / 2]
    assert history["labels"] == [timezone.localtime(t).strftime("%H:%M") for t in expected]


def test_queue_page_with_history_renders(world: dict[str, Any], client: Client) -> None:
    queue = world["queues"]["alpha"]
    _sample(queue, timezone.now() - timedelta(minutes=3), 2)
    client.force_login(world["users"]["member"])
    response = client.get(f"/queues/{queue.name}/?window=hour")
    assert response.status_code == 200
    assert response.context["history"]["samples"] == 1
    assert response.context["history"]["series"]["allocated"] == [2.0]
