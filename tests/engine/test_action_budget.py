"""An eviction action stopped by its time budget is counted in the cycle's counters, so the
portal (cycle rows, API) and the benchmark can say that the answer depends on the budget."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle


def _contested() -> Snapshot:
    """Queue b over its quota holds both GPUs; a, under its quota, waits: reclaim must search."""

    def queue(name: str, quota: float, index: int) -> Queue:
        return Queue(name, parent=None, created_index=index, resources={"gpu": QueueResource(quota, -1, 1)})

    def job(name: str, queue: str, node: str | None) -> Job:
        state = TaskState.RUNNING if node else TaskState.PENDING
        return Job(
            name,
            queue=queue,
            tasks=[Task(f"{name}-0", gpu=1, state=state, node=node)],
            min_available=1,
            created_s=0.0,
            last_start_s=0.0 if node else None,
        )

    return Snapshot(
        nodes=[Node("n1", gpus=2)],
        queues=[queue("a", 1, 0), queue("b", 0, 1)],
        jobs=[job("b1", "b", "n1"), job("b2", "b", "n1"), job("a1", "a", None)],
    )


def test_an_action_out_of_time_is_counted_and_one_that_finishes_is_not() -> None:
    finished = run_cycle(_contested(), Config(actions=("allocate", "reclaim"), action_time_budget_s=600.0))
    assert finished.counters["actions_out_of_time"] == 0
    assert finished.counters["evicted"] == 1  # reclaim did its work

    stopped = run_cycle(_contested(), Config(actions=("allocate", "reclaim"), action_time_budget_s=0.0))
    assert stopped.counters["actions_out_of_time"] == 1
    assert stopped.counters["evicted"] == 0
