"""Shortcuts of the eviction actions' job loop (scheduler/actions/victims.py ``run_action``).

An action first screens every job (``SCREEN_FIRST``): when none needs a victim search, the
notes are the same in any order and the jobs are never ordered.

Until a scenario is committed, a job with the same queue, priority, selector and task shapes
as one whose search failed - and met in the same turn of the allocate order (``_same_turn``) -
gets the same note without a second search. The cycle's answer must be exactly the one of a
search per job: compared here on random contested snapshots with the shortcut switched off.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler.actions import victims

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")


def _queue(name: str, quota: float, index: int, parent: str = "root") -> Queue:
    return Queue(name, parent=parent, created_index=index, resources={"gpu": QueueResource(quota, -1, 1)})


def _job(name: str, queue: str, gpu: float, created_s: float, node: str | None = None, prio: int = 50) -> Job:
    state = TaskState.RUNNING if node else TaskState.PENDING
    return Job(
        name,
        queue=queue,
        priority=prio,
        tasks=[Task(f"{name}-0", gpu=gpu, state=state, node=node)],
        min_available=1,
        created_s=created_s,
        last_start_s=600.0 if node else None,
    )


def _answer(snap: Snapshot) -> str:
    result = run_cycle(snap, Config(actions=ACTIONS, action_time_budget_s=600.0))
    return json.dumps(result.to_json(), sort_keys=True, default=str)


def _without_shortcut(monkeypatch: pytest.MonkeyPatch, snap: Snapshot) -> str:
    with monkeypatch.context() as m:
        m.setattr(victims, "_alike", lambda session, job, tasks: None)
        m.setattr(victims, "SCREEN_FIRST", False)
        return _answer(snap)


def _dept_snapshot(between_gpu: float | None) -> Snapshot:
    """dept-a is over its quota, its leaf a1 under: a1's quarter-GPU jobs pass reclaim's first
    checks, but allocate would serve dept-b's victims first, so every search fails."""
    root = Queue("root", resources={"gpu": QueueResource(-1, -1, 1)})
    queues = [
        root,
        _queue("dept-a", 2, 1),
        _queue("dept-b", 6, 2),
        _queue("a1", 1, 3, "dept-a"),
        _queue("a2", 1, 4, "dept-a"),
        _queue("b1", 6, 5, "dept-b"),
    ]
    nodes = [Node("n0", gpus=4), Node("n1", gpus=4)]
    jobs = [
        _job("a2-run-0", "a2", 1, 10, "n0"),
        _job("a2-run-1", "a2", 1, 11, "n0"),
        _job("a1-run", "a1", 0.5, 12, "n0"),
    ]
    jobs += [_job(f"b1-run-{i}", "b1", 1, 20 + i, "n1" if i < 4 else "n0") for i in range(5)]
    jobs += [_job(f"a1-quarter-{i}", "a1", 0.25, 100 + i) for i in range(4)]
    if between_gpu is not None:
        jobs.append(_job("a1-between", "a1", between_gpu, 101.5))
    return Snapshot(nodes, queues, jobs)


@pytest.mark.parametrize("between_gpu", [None, 0.25, 1.0])
def test_shortcut_gives_the_same_answer(monkeypatch: pytest.MonkeyPatch, between_gpu: float | None) -> None:
    snap = _dept_snapshot(between_gpu)
    assert _answer(snap) == _without_shortcut(monkeypatch, snap)


def test_alike_jobs_are_searched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    searched: list[str] = []
    real = victims.solve

    def counting(session, stmt, job, *args, **kwargs):  # type: ignore[no-untyped-def]
        searched.append(job.name)
        return real(session, stmt, job, *args, **kwargs)

    monkeypatch.setattr(victims, "solve", counting)
    run_cycle(_dept_snapshot(None), Config(actions=("reclaim",), action_time_budget_s=600.0))
    quarters = [n for n in searched if n.startswith("a1-quarter")]
    # without the shortcut every quarter-GPU job would be searched for
    assert quarters and len(quarters) < 4, searched

    searched.clear()
    run_cycle(_dept_snapshot(1.0), Config(actions=("reclaim",), action_time_budget_s=600.0))
    # a pending 1-GPU job between two of them in job order: not the same turn, searched again
    assert "a1-quarter-2" in searched, searched


@st.composite
def contested(draw: st.DrawFn) -> Snapshot:
    """``_dept_snapshot``'s shape at random: department and leaf quotas, which leaf runs what,
    and pending jobs of a few shapes, often the same shape several times in a leaf."""
    root = Queue("root", resources={"gpu": QueueResource(-1, -1, 1)})
    queues = [root, _queue("dept-a", draw(st.sampled_from([1, 2, 3])), 1)]
    queues.append(_queue("dept-b", draw(st.sampled_from([3, 5, 6])), 2))
    leaves = ["a1", "a2", "b1", "b2"]
    for i, leaf in enumerate(leaves):
        queues.append(_queue(leaf, draw(st.sampled_from([0, 1, 2, 3])), 3 + i, f"dept-{leaf[0]}"))
    nodes = [Node("n0", gpus=4), Node("n1", gpus=4)]
    jobs = []
    k = 0
    for n in nodes:
        free = 4.0
        while free > 0:
            gpu = min(free, draw(st.sampled_from([0.5, 1, 1, 2])))
            jobs.append(
                _job(f"r{k:02d}", draw(st.sampled_from(leaves)), gpu, draw(st.integers(0, 5)), n.name)
            )
            free -= gpu
            k += 1
    for j in range(draw(st.integers(2, 10))):
        gpu = draw(st.sampled_from([0.25, 0.25, 0.25, 0.5, 1]))
        leaf = draw(st.sampled_from(["a1", "a1", "a2", "b1"]))
        jobs.append(_job(f"p{j:02d}", leaf, gpu, 10 + j, prio=draw(st.sampled_from([50, 50, 50, 100]))))
    return Snapshot(nodes, queues, jobs)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(contested())
def test_shortcut_matches_a_search_per_job(monkeypatch: pytest.MonkeyPatch, snap: Snapshot) -> None:
    assert _answer(snap) == _without_shortcut(monkeypatch, snap)


@pytest.mark.parametrize("builder", ["stress_snapshot", "stress_mixed_snapshot"])
def test_bench_shapes_give_the_same_answer(monkeypatch: pytest.MonkeyPatch, builder: str) -> None:
    """The benchmark's stress shapes, small: every eviction action screens all jobs first."""
    from scheduler.bench import workloads

    snap = getattr(workloads, builder)(n_nodes=40, running=300, pending=120)
    answer = _answer(snap)
    assert json.loads(answer)["job_notes"], "the small stress cycle leaves jobs with notes"
    assert answer == _without_shortcut(monkeypatch, snap)
