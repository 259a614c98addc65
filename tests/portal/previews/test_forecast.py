"""Queue position and estimated start, checked against the engine and the real loop."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kai_portal.previews.forecast import (
    UNKNOWN_HORIZON,
    UNKNOWN_NEVER_FITS,
    UNKNOWN_NO_DURATION,
    forecast,
)
from kai_portal.workloads.models import Job
from tests.portal import factories

pytestmark = pytest.mark.django_db


def _state(job: Job) -> str:
    job.refresh_from_db()
    return job.state


def test_a_job_in_a_quiet_queue_starts_when_the_job_it_waits_for_ends(loop, leaf):
    factories.node("n1", gpus=2)
    first = factories.job(leaf, "first", gpu_count=2, duration=timedelta(seconds=600))
    second = factories.job(leaf, "second", gpu_count=2, duration=timedelta(seconds=60))
    loop.run()  # binds first
    loop.run(5)  # first starts running
    assert _state(first) == "running" and _state(second) == "pending"
    started = first.pods.get().started_at
    assert started == loop.now

    loop.now += timedelta(seconds=42)  # look at it some time later
    fc = forecast(loop.now)
    assert set(fc) == {second.pk}
    f = fc[second.pk]
    assert (f.queue_position, f.queue_pending, f.cluster_position, f.cluster_pending) == (1, 1, 1, 1)
    assert f.ahead == []
    assert f.estimated_start == started + first.duration  # exactly

    # The real loop at that moment: first ends and second is bound in the same cycle.
    loop.now = f.estimated_start - timedelta(seconds=1)
    loop.run()
    assert _state(second) == "pending"
    loop.run(1)
    assert _state(first) == "succeeded"
    second.refresh_from_db()
    assert [p.state for p in second.pods.all()] == ["bound"]


def test_positions_follow_kai_job_order_and_queue_order(loop, department):
    factories.node("n1", gpus=2)
    a = factories.queue("a", parent=department, gpu_quota=1)
    b = factories.queue("b", parent=department, gpu_quota=1)
    blocker = factories.job(a, "blocker", gpu_count=2, duration=timedelta(seconds=100))
    loop.run()
    loop.run(5)
    low = factories.job(a, "a-low", gpu_count=1, priority=10, duration=timedelta(seconds=100))
    high = factories.job(a, "a-high", gpu_count=1, priority=90, duration=timedelta(seconds=100))
    other = factories.job(b, "b-one", gpu_count=1, duration=timedelta(seconds=100))
    fc = forecast(loop.now)
    assert set(fc) == {low.pk, high.pk, other.pk}
    # Inside queue a: higher priority first.
    assert (fc[high.pk].queue_position, fc[low.pk].queue_position) == (1, 2)
    assert fc[other.pk].queue_position == 1
    # Across the pool: b is starved with its job (a is over its quota with the blocker), so it goes first.
    assert fc[other.pk].cluster_position == 1
    assert fc[high.pk].cluster_position < fc[low.pk].cluster_position
    assert fc[low.pk].ahead == [other.pk, high.pk]
    # b is under its quota and a over it: reclaim evicts the blocker at once, b-one binds a cycle
    # later, long before the blocker would have ended. The real loop agrees within one cycle plus
    # the eviction grace (the simulator frees evicted GPUs at once).
    end = blocker.pods.get().started_at + blocker.duration
    assert fc[other.pk].estimated_start < end
    loop.run()
    while loop.now < fc[other.pk].estimated_start + timedelta(seconds=10):
        loop.run(5)
    assert other.pods.get().state in ("bound", "running")


def test_unknown_when_the_job_never_fits(loop, leaf):
    # Submitted before the node was observed (submission refuses a task bigger than every known node).
    big = factories.job(leaf, "huge", gpu_count=4, duration=timedelta(seconds=60))
    factories.node("n1", gpus=2)
    loop.run()
    f = forecast(loop.now)[big.pk]
    assert f.estimated_start is None and f.unknown == UNKNOWN_NEVER_FITS
    assert "empty cluster" in f.reason


def test_unknown_when_it_waits_on_a_job_without_duration(loop, leaf):
    factories.node("n1", gpus=2)
    factories.job(leaf, "forever", gpu_count=2)  # no declared duration
    loop.run()
    loop.run(5)
    waiting = factories.job(leaf, "waiting", gpu_count=2, duration=timedelta(seconds=60))
    f = forecast(loop.now)[waiting.pk]
    assert f.estimated_start is None and f.unknown == UNKNOWN_NO_DURATION
    assert "1 job without a declared duration" in f.reason


def test_unknown_beyond_the_horizon(loop, leaf):
    factories.node("n1", gpus=2)
    factories.job(leaf, "long", gpu_count=2, duration=timedelta(days=9))
    loop.run()
    loop.run(5)
    waiting = factories.job(leaf, "waiting", gpu_count=2, duration=timedelta(seconds=60))
    f = forecast(loop.now)[waiting.pk]
    assert f.estimated_start is None and f.unknown == UNKNOWN_HORIZON


def test_a_job_that_fits_now_starts_now(loop, leaf):
    factories.node("n1", gpus=2)
    job = factories.job(leaf, "now", gpu_count=1, duration=timedelta(seconds=60))
    fc = forecast(loop.now)
    assert fc[job.pk].estimated_start == loop.now


def test_a_job_above_its_queue_limit_is_not_said_to_fit_nowhere(loop, leaf):
    leaf.gpu_limit = 4
    leaf.save()
    factories.node("n1", gpus=8)
    over = factories.job(leaf, "over-limit", gpu_count=6, duration=timedelta(seconds=60))
    loop.run()
    f = forecast(loop.now)[over.pk]
    assert f.estimated_start is None and f.unknown == UNKNOWN_NEVER_FITS
    assert "queue's limit" in f.reason and "empty cluster" not in f.reason


def test_cluster_positions_alternate_between_equal_queues_as_allocate_would(loop, department):
    # Each pop charges its job to its queue and the next pop must see that charge, so two equal
    # queues take turns (the engine's queue order caches keys by the queues' allocation stamps).
    factories.node("n1", gpus=1)
    a = factories.queue("a", parent=department, gpu_quota=4)
    b = factories.queue("b", parent=department, gpu_quota=4)
    jobs = {q.name: [factories.job(q, f"{q.name}-{i}", gpu_count=1) for i in range(3)] for q in (a, b)}
    fc = forecast(loop.now)
    order = [q for _, q in sorted((fc[j.pk].cluster_position, q) for q, js in jobs.items() for j in js)]
    assert all(x != y for x, y in zip(order, order[1:], strict=False)), order
