"""Pods outside the scheduler (``Node.external``): KAI charges every pod on a node to it.

The devices they hold are not known (another scheduler's device plugin chose them), so the
engine takes that many devices none of its own tasks holds; those are never handed out.
"""

from __future__ import annotations

from scheduler import Config, ExternalUsage, Job, Node, Queue, Snapshot, Task, TaskState, run_cycle
from scheduler.overcommit import problems


def _snapshot(external: ExternalUsage, pending: int) -> Snapshot:
    node = Node("n", gpus=4, cpu_millis=8000, max_pods=10, external=external)
    held = Task("ours-0", gpu=1, state=TaskState.RUNNING, node="n", gpu_devices=(3,))
    running = Job("ours", "q", tasks=[held])
    new = Job("new", "q", min_available=1, tasks=[Task(f"new-{i}", gpu=1) for i in range(pending)])
    return Snapshot(nodes=[node], queues=[Queue("q")], jobs=[running, new])


def test_devices_held_by_other_schedulers_pods_are_never_handed_out() -> None:
    snapshot = _snapshot(ExternalUsage(gpus=2), pending=2)

    result = run_cycle(snapshot, Config(actions=("allocate",)))

    placed = [o for o in result.tasks.values() if o.status == TaskState.ALLOCATED]
    assert [(o.key, o.gpu_devices) for o in placed] == [("new-0", (0,))]  # 3 is ours, 2 and 1 theirs
    assert result.tasks["new-1"].status == TaskState.PENDING
    assert problems(snapshot, result) == []


def test_the_over_commit_check_counts_other_schedulers_pods() -> None:
    snapshot = _snapshot(ExternalUsage(gpus=3, pods=10), pending=1)
    unaware = _snapshot(ExternalUsage(), pending=1)

    result = run_cycle(unaware, Config(actions=("allocate",)))  # placed as if the node were empty

    assert result.tasks["new-0"].status == TaskState.ALLOCATED
    found = problems(snapshot, result)
    assert any("held by other pods" in p for p in found)
    assert any("pods > 10" in p for p in found)


def test_what_other_schedulers_pods_hold_is_no_queues_fair_share() -> None:
    snapshot = _snapshot(ExternalUsage(gpus=3), pending=3)
    snapshot.jobs[1].tasks.append(Task("new-big", gpu=4))

    result = run_cycle(snapshot, Config(actions=("allocate",)))

    assert result.queues["q"].fair_share["gpu"] == 1  # 4 GPUs, 3 held by other pods
