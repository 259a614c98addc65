"""client-go's event spam filter (event_spam.py): 25 per object at once, then one per five minutes."""

from __future__ import annotations

from kai_portal.cluster.backends.event_spam import EventSpamFilter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_per_refill_period_per_object() -> None:
    clock = Clock()
    spam = EventSpamFilter(burst=25, refill_seconds=300, clock=clock)
    assert [spam.allow("pod-a") for _ in range(26)] == [True] * 25 + [False]
    assert spam.allow("pod-b")  # another object has its own bucket
    clock.now += 299
    assert not spam.allow("pod-a")
    clock.now += 1  # 300 s after the bucket ran dry: one token, and it is spent
    assert spam.allow("pod-a") and not spam.allow("pod-a")
    clock.now += 10 * 300  # refills up to the burst, never beyond
    assert [spam.allow("pod-a") for _ in range(12)] == [True] * 10 + [False] * 2


def test_a_dropped_event_spends_nothing() -> None:
    clock = Clock()
    spam = EventSpamFilter(burst=1, refill_seconds=60, clock=clock)
    assert spam.allow("x")
    for _ in range(5):  # refused tries in between do not push the next token further away
        clock.now += 10
        assert not spam.allow("x")
    clock.now += 10
    assert spam.allow("x")
