"""What blocks a pending job, as the cycle's structured result keeps it (``CycleResult.job_blockers``):
the jobs protected by their minimum runtime with the seconds left, the queues reclaim may take
from, the limit or quota it would cross. None of it enters the worded result (``to_json``)."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, reasons, run_cycle
from scheduler.reasons import Reason, render

R = TaskState.RUNNING
ROOT = Queue("root", resources={"gpu": QueueResource(-1, -1, 1)})


def q(name: str, quota: float = 0, limit: float = -1, **kw: object) -> Queue:
    return Queue(name, parent="root", resources={"gpu": QueueResource(quota, limit, 1)}, **kw)  # type: ignore[arg-type]


def running(name: str, queue: str, node: str, gpu: float = 1, n: int = 1, **kw: object) -> Job:
    tasks = [Task(f"{name}-{i}", gpu=gpu, state=R, node=node) for i in range(n)]
    return Job(name, queue, tasks=tasks, **kw)  # type: ignore[arg-type]


def pending(name: str, queue: str, gpu: float = 1, n: int = 1, **kw: object) -> Job:
    return Job(name, queue, tasks=[Task(f"{name}-{i}", gpu=gpu) for i in range(n)], **kw)  # type: ignore[arg-type]


def of(found: list[Reason], code: str) -> list[Reason]:
    return [r for r in found if r.code == code]


def test_reclaim_names_the_protected_job_and_the_seconds_left() -> None:
    # b is below its fair share; a is over it, but its only job started 600 s ago and a's jobs
    # may not be reclaimed within 1800 s: reclaim fails, and says whom and for how long.
    queues = [ROOT, q("a", 0, reclaim_min_runtime_s=1800), q("b", 4)]
    jobs = [running("old", "a", "n0", n=4, last_start_s=600.0, min_available=4), pending("want", "b", n=4)]
    r = run_cycle(Snapshot([Node("n0", gpus=4)], queues, jobs), Config(actions=("allocate", "reclaim")))
    assert r.tasks["want-0"].status == TaskState.PENDING and not r.evictions
    found = r.job_blockers["want"]
    (prot,) = of(found, reasons.PROTECTED_BY_MIN_RUNTIME)
    action, ref, queue, left, surplus_only = prot.params
    assert (action, ref.key, queue, left, surplus_only) == ("reclaim", "old", "a", 1200.0, False)
    assert "protected from reclaim by its minimum runtime for another 20m0s" in render(prot)
    (source,) = of(found, reasons.RECLAIM_SOURCE)
    assert source.params[0] == "a" and source.params[1]["gpu"] == 4.0  # type: ignore[index]
    assert found[0].code == reasons.RECLAIM_NOT_POSSIBLE  # the action's own note comes first


def test_once_protection_ends_the_same_job_is_reclaimed() -> None:
    queues = [ROOT, q("a", 0, reclaim_min_runtime_s=1800), q("b", 4)]
    jobs = [running("old", "a", "n0", n=4, last_start_s=1800.0, min_available=4), pending("want", "b", n=4)]
    r = run_cycle(Snapshot([Node("n0", gpus=4)], queues, jobs), Config(actions=("allocate", "reclaim")))
    assert {e.job for e in r.evictions} == {"old"} and "want" not in r.job_blockers


def test_preempt_names_the_protected_lower_priority_job() -> None:
    queues = [ROOT, q("a", 2, preempt_min_runtime_s=300)]
    jobs = [running("low", "a", "n0", n=2, priority=50, last_start_s=100.0, min_available=2),
            pending("high", "a", n=2, priority=100)]  # fmt: skip
    r = run_cycle(Snapshot([Node("n0", gpus=2)], queues, jobs), Config(actions=("allocate", "preempt")))
    assert not r.evictions
    (prot,) = of(r.job_blockers["high"], reasons.PROTECTED_BY_MIN_RUNTIME)
    assert prot.params[0] == "preempt" and prot.params[1].key == "low" and prot.params[3] == 200.0  # type: ignore[union-attr]
    assert not of(r.job_blockers["high"], reasons.RECLAIM_SOURCE)


def test_a_limit_refusal_carries_queue_resource_and_numbers() -> None:
    queues = [ROOT, q("a", 1, limit=2)]
    jobs = [running("r", "a", "n0", n=1), pending("big", "a", n=2)]
    r = run_cycle(Snapshot([Node("n0", gpus=8)], queues, jobs), Config())
    (lim,) = of(r.job_blockers["big"], reasons.OVER_LIMIT)
    assert lim.params == ("a", "gpu", 2.0, 1.0, 2.0)


def test_blockers_stay_out_of_the_worded_result() -> None:
    queues = [ROOT, q("a", 0, reclaim_min_runtime_s=1800), q("b", 4)]
    jobs = [running("old", "a", "n0", n=4, last_start_s=600.0, min_available=4), pending("want", "b", n=4)]
    r = run_cycle(Snapshot([Node("n0", gpus=4)], queues, jobs), Config(actions=("allocate", "reclaim")))
    assert r.job_blockers and "old" not in str(r.to_json()["job_notes"])
    assert "job_blockers" not in r.to_json()
