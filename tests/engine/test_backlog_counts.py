"""Pending work a snapshot does not list (``Job.more_pending``, ``Queue.unlisted``, issue 26).

A job of 10,000 tasks on a pool of 8 GPUs needs only its first 9 tasks listed for the cycle to
decide as it would on all of them; the rest must still count in the queue's request, or the
fair shares (and so every queue's order and reclaim) would change.
"""

from __future__ import annotations

import dataclasses

import pytest

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, run_cycle


def _queues() -> list[Queue]:
    def q(name: str, quota: float, parent: str | None = None, index: int = 0) -> Queue:
        res = {r: QueueResource(quota if r == "gpu" else 0, -1, 1) for r in ("gpu", "cpu", "memory")}
        return Queue(name, parent=parent, created_index=index, resources=res)

    return [q("dept", 8), q("a", 2, "dept", 1), q("b", 2, "dept", 2), q("c", 0, "dept", 3)]


def _job(name: str, queue: str, n: int, gpu: float = 1, cpu: float = 500, min_available: int = 1) -> Job:
    tasks = [Task(f"{name}-{i}", job=name, gpu=gpu, cpu_millis=cpu) for i in range(n)]
    return Job(name, queue=queue, tasks=tasks, min_available=min_available, created_s=100.0 - n)


def _snapshot(jobs: list[Job]) -> Snapshot:
    return Snapshot(nodes=[Node("n1", gpus=8, cpu_millis=64_000)], queues=_queues(), jobs=jobs)


@pytest.mark.parametrize(("gpu", "n"), [(1, 300), (0.5, 300), (0.3, 100)])
def test_listing_what_the_pool_could_hold_plus_one_decides_as_the_whole_job(gpu: float, n: int) -> None:
    whole = _snapshot([_job("flood", "a", n, gpu), _job("small", "b", 3), _job("tiny", "c", 1)])
    fits = int(8 / gpu)
    cut = dataclasses.replace(whole.jobs[0], tasks=whole.jobs[0].tasks[: fits + 1], more_pending=n - fits - 1)
    bounded = dataclasses.replace(whole, jobs=[cut, *whole.jobs[1:]])

    full, part = run_cycle(whole, Config()), run_cycle(bounded, Config())

    assert {a.key: a.node for a in part.allocations} == {a.key: a.node for a in full.allocations}
    assert part.job_messages == full.job_messages
    for name in ("a", "b", "c", "dept"):
        assert part.queues[name].requested == full.queues[name].requested
        assert part.queues[name].fair_share == full.queues[name].fair_share
    for name, outcome in part.tasks.items():
        assert outcome.reason == full.tasks[name].reason


def test_a_queues_unlisted_tasks_count_in_its_request_and_fair_share() -> None:
    listed = _snapshot([_job("first", "a", 1), _job("second", "a", 20), _job("theirs", "b", 20)])
    like_second = Task("like-second", gpu=1, cpu_millis=500)
    queues = [dataclasses.replace(q, unlisted=[(like_second, 20)]) if q.name == "a" else q for q in _queues()]
    bounded = Snapshot(nodes=listed.nodes, queues=queues, jobs=[listed.jobs[0], listed.jobs[2]])

    full, part = run_cycle(listed, Config()), run_cycle(bounded, Config())

    assert part.queues["a"].requested == full.queues["a"].requested == {"gpu": 21, "cpu": 10_500, "memory": 0}
    assert part.queues["b"].fair_share == full.queues["b"].fair_share
    assert part.queues["a"].fair_share == full.queues["a"].fair_share


def test_a_gang_of_10000_stops_at_its_first_task_that_fits_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """KAI tries a gang's pods in order and stops at the first that fits nowhere: 8 free GPUs give 8
    placements and one failure, not 10,000 tries."""
    import importlib

    allocate = importlib.import_module("scheduler.actions.allocate")
    calls = []
    place = allocate.place_task
    monkeypatch.setattr(allocate, "place_task", lambda *a, **k: calls.append(1) or place(*a, **k))
    gang = _job("gang", "a", 10_000, min_available=10_000)

    result = run_cycle(_snapshot([gang]), Config(actions=("allocate",)))

    assert len(calls) == 9
    assert not result.allocations
    assert "Resources were found for 8 pods while 10000 are required" in result.job_message("gang")
