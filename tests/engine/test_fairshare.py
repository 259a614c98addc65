"""Fair-share division, checked against the worked examples of kai-semantics.md §2."""

from __future__ import annotations

from scheduler.fairshare import DivisionInput, compute_fair_shares, divide
from scheduler.model import Queue, QueueResource


def gpu_queue(
    name: str,
    quota: float = 0,
    limit: float = -1,
    weight: float = 1,
    priority: int = 100,
    parent: str | None = None,
    index: int = 0,
) -> Queue:
    return Queue(
        name,
        parent=parent,
        priority=priority,
        created_index=index,
        resources={"gpu": QueueResource(quota, limit, weight)},
    )


def gpu_shares(
    queues: list[Queue],
    capacity: float,
    requests: dict[str, float],
    usage: dict[str, float] | None = None,
    k: float = 0.0,
) -> dict[str, float]:
    res = compute_fair_shares(
        queues,
        {"gpu": capacity},
        {q: {"gpu": v} for q, v in requests.items()},
        {q: {"gpu": u} for q, u in (usage or {}).items()},
        k,
    )
    return {q: v["gpu"] for q, v in res.fair_share.items()}


def test_worked_example_two_levels() -> None:
    queues = [
        gpu_queue("A", quota=4, index=0),
        gpu_queue("B", quota=2, limit=5, weight=2, index=1),
        gpu_queue("C", quota=3, index=2),
        gpu_queue("D", priority=50, index=3),
        gpu_queue("A1", quota=1, weight=1, parent="A", index=4),
        gpu_queue("A2", quota=0, weight=3, parent="A", index=5),
    ]
    fs = gpu_shares(queues, 12, {"A1": 5, "A2": 5, "B": 10, "C": 1, "D": 4})
    assert (fs["A"], fs["B"], fs["C"], fs["D"]) == (6, 5, 1, 0)
    assert (fs["A1"], fs["A2"]) == (2, 4)


def test_three_level_tree() -> None:
    queues = [
        gpu_queue("org", quota=-1, index=0),
        gpu_queue("dept1", quota=4, parent="org", index=1),
        gpu_queue("dept2", quota=2, parent="org", index=2),
        gpu_queue("t1", quota=1, parent="dept1", index=3),
        gpu_queue("t2", quota=1, weight=3, parent="dept1", index=4),
        gpu_queue("t3", parent="dept2", index=5),
    ]
    fs = gpu_shares(queues, 16, {"t1": 8, "t2": 8, "t3": 8})
    assert fs["org"] == 16
    # dept1 4 + dept2 2 by quota, 10 surplus split 1:1 -> 9 / 7.
    assert (fs["dept1"], fs["dept2"]) == (9, 7)
    # t1 1 + t2 1 by quota, 7 surplus split 1:3 -> 1.75 / 5.25 -> floors 1 / 5, crumb to t1 (.75 > .25).
    assert (fs["t1"], fs["t2"], fs["t3"]) == (3, 6, 7)
    assert fs["t1"] + fs["t2"] <= fs["dept1"]


def test_deep_dive_priorities_and_weights() -> None:
    queues = [
        gpu_queue("vision", quota=2, weight=2, priority=2, index=0),
        gpu_queue("llm", quota=2, weight=1, priority=2, index=1),
        gpu_queue("data", quota=3, weight=1, priority=1, index=2),
    ]
    fs = gpu_shares(queues, 10, {"vision": 10, "llm": 10, "data": 10})
    assert (fs["vision"], fs["llm"], fs["data"]) == (4, 3, 3)


def test_higher_priority_bucket_is_served_first() -> None:
    queues = [
        gpu_queue("hi", weight=1, priority=2, index=0),
        gpu_queue("lo", weight=100, priority=1, index=1),
    ]
    fs = gpu_shares(queues, 8, {"hi": 6, "lo": 6})
    assert (fs["hi"], fs["lo"]) == (6, 2)


def test_crumbs_leak_down_a_priority() -> None:
    queues = [gpu_queue(n, index=i) for i, n in enumerate("XYZ")] + [gpu_queue("L", priority=50, index=3)]
    fs = gpu_shares(queues, 10, {"X": 10, "Y": 10, "Z": 10, "L": 5})
    assert [fs[n] for n in "XYZL"] == [3, 3, 3, 1]


def test_crumb_pass_can_exceed_request_and_prefers_older() -> None:
    fs = divide(5, [DivisionInput("E", 0, -1, 1, 100, 2.7, 0), DivisionInput("F", 0, -1, 1, 100, 2.7, 1)])
    assert (fs["E"], fs["F"]) == (3, 2)


def test_zero_weight_gets_no_surplus() -> None:
    queues = [gpu_queue("a", quota=1, weight=0, index=0), gpu_queue("b", quota=1, weight=0, index=1)]
    fs = gpu_shares(queues, 10, {"a": 5, "b": 5})
    assert (fs["a"], fs["b"]) == (1, 1)


def test_unlimited_quota_deserves_all_it_requests() -> None:
    queues = [gpu_queue("a", quota=-1, weight=0, index=0), gpu_queue("b", weight=1, index=1)]
    fs = gpu_shares(queues, 10, {"a": 7, "b": 7})
    assert (fs["a"], fs["b"]) == (7, 3)


def test_limit_caps_fair_share() -> None:
    queues = [gpu_queue("a", limit=2, index=0), gpu_queue("b", index=1)]
    fs = gpu_shares(queues, 10, {"a": 9, "b": 3})
    assert (fs["a"], fs["b"]) == (2, 3)


def test_quota_is_not_reserved() -> None:
    queues = [gpu_queue("a", quota=6, index=0), gpu_queue("b", index=1)]
    fs = gpu_shares(queues, 10, {"a": 1, "b": 20})
    assert (fs["a"], fs["b"]) == (1, 9)


def test_oversubscribed_quotas_skip_surplus() -> None:
    queues = [gpu_queue("a", quota=8, index=0), gpu_queue("b", quota=8, index=1)]
    fs = gpu_shares(queues, 10, {"a": 8, "b": 8})
    assert (fs["a"], fs["b"]) == (8, 8)


def test_time_based_fair_share() -> None:
    queues = [gpu_queue("P", index=0), gpu_queue("R", index=1)]
    fs = gpu_shares(queues, 10, {"P": 10, "R": 10}, usage={"P": 0.6, "R": 0.1}, k=1.0)
    assert (fs["P"], fs["R"]) == (3, 7)


def test_cpu_divided_in_millicores() -> None:
    q = [Queue("a", resources={"cpu": QueueResource(0, -1, 1)}), Queue("b", created_index=1)]
    res = compute_fair_shares(q, {"cpu": 1001}, {"a": {"cpu": 5000}, "b": {"cpu": 5000}})
    assert res.fair_share["a"]["cpu"] + res.fair_share["b"]["cpu"] == 1001
    assert {res.fair_share["a"]["cpu"], res.fair_share["b"]["cpu"]} == {500, 501}
