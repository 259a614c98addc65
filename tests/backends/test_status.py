"""The status updater's pure parts (backends/kubernetes/status.py): client-go's event spam filter (25 per
object at once, then one per five minutes) and the aggregated Event's name and body."""

from __future__ import annotations

from datetime import UTC, datetime

from kai_portal.cluster.backends import EventType, PodEvent
from kai_portal.cluster.backends.kubernetes.status import EventSpamFilter, event_body, event_name


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


def test_one_event_name_per_object_uid_and_words_and_a_valid_name_for_any_pod_name() -> None:
    """client-go's aggregation: the same (object, type, reason, message) maps to the same Event in any
    process (a restarted worker bumps it); a re-created pod (new uid) or new words get a new one."""
    waiting = PodEvent("ml", "p" * 300, EventType.WARNING, "Unschedulable", "no node fits", uid="u1")
    again = PodEvent("ml", "p" * 300, EventType.WARNING, "Unschedulable", "no node fits", uid="u1")
    recreated = PodEvent("ml", "p" * 300, EventType.WARNING, "Unschedulable", "no node fits", uid="u2")
    reworded = PodEvent("ml", "p" * 300, EventType.WARNING, "Unschedulable", "still no node", uid="u1")

    assert event_name(waiting) == event_name(again)
    assert len({event_name(waiting), event_name(recreated), event_name(reworded)}) == 3
    assert len(event_name(waiting)) <= 253 and event_name(waiting)[-17] == "."


def test_a_podgroup_event_is_about_kais_podgroup_and_names_our_scheduler() -> None:
    event = PodEvent("ml", "train-7", EventType.NORMAL, "Unschedulable", "gang of 4 needs 4 nodes",
                     kind="PodGroup")  # fmt: skip
    now = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)

    body = event_body(event, event_name(event), now, "kai-scheduler", {"evictor-action-type": "reclaim"})

    assert body["involvedObject"] == {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                                      "name": "train-7", "namespace": "ml"}  # fmt: skip
    assert (body["source"], body["count"], body["firstTimestamp"]) == (
        {"component": "kai-scheduler"}, 1, "2026-11-28T05:00:00Z")  # fmt: skip
    assert body["metadata"]["annotations"] == {"evictor-action-type": "reclaim"}
