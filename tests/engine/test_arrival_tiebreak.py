"""Jobs of one age (Kubernetes timestamps have whole seconds) are taken in KAI's order: by the
arrival tie-break (the PodGroup's name, KAI's ``PodGroupInfo.UID``) before the job's name, and
victims in the reverse of that order. An empty tie-break leaves the name to decide."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle


def _job(name: str, tiebreak: str, *, running_on: str | None = None, priority: int = 50) -> Job:
    state = TaskState.RUNNING if running_on else TaskState.PENDING
    devices = (0,) if running_on else ()
    task = Task(f"{name}-0", job=name, gpu=1, state=state, node=running_on, gpu_devices=devices)
    return Job(name, queue="q", priority=priority, created_s=30.0, arrival_tiebreak=tiebreak, tasks=[task])


def _queues() -> list[Queue]:
    return [Queue("q", resources={"gpu": QueueResource(quota=1)})]


def _placed(snapshot: Snapshot) -> set[str]:
    result = run_cycle(snapshot, Config())
    return {k for k, o in result.tasks.items() if o.status in (TaskState.PIPELINED, TaskState.ALLOCATED)}


def test_the_lower_tiebreak_is_taken_first_whatever_the_names() -> None:
    jobs = [_job("aa", "pg-aa-f0"), _job("zz", "pg-aa-0-1")]  # by name aa; by PodGroup name zz
    assert _placed(Snapshot(nodes=[Node("n1", gpus=1)], queues=_queues(), jobs=jobs)) == {"zz-0"}


def test_an_empty_tiebreak_leaves_the_name_to_decide() -> None:
    jobs = [_job("zz", ""), _job("aa", "")]
    assert _placed(Snapshot(nodes=[Node("n1", gpus=1)], queues=_queues(), jobs=jobs)) == {"aa-0"}


def test_age_still_comes_before_the_tiebreak() -> None:
    older = _job("zz", "pg-z")
    older.created_s = 31.0
    jobs = [_job("aa", "pg-a"), older]
    assert _placed(Snapshot(nodes=[Node("n1", gpus=1)], queues=_queues(), jobs=jobs)) == {"zz-0"}


def test_the_victim_of_two_equal_running_jobs_is_the_one_with_the_higher_tiebreak() -> None:
    """Two low-priority jobs of one age run; a high-priority job preempts one: KAI's victim order
    is its job order reversed, so the higher PodGroup name goes, whatever the names."""
    jobs = [
        _job("aa", "pg-b", running_on="n1", priority=10),
        _job("zz", "pg-a", running_on="n2", priority=10),
        _job("urgent", "", priority=100),
    ]
    queues = [Queue("q", resources={"gpu": QueueResource(quota=2)})]
    nodes = [Node("n1", gpus=1), Node("n2", gpus=1)]
    result = run_cycle(Snapshot(nodes=nodes, queues=queues, jobs=jobs), Config())
    assert [e.job for e in result.evictions] == ["aa"]
