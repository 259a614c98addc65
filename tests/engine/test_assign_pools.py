"""``pools.assign_pools`` with every node and queue in one pool takes that pool without reading
the tasks, except for a job that names another pool or whose queue is unknown: the same answer
as the task-by-task rule."""

from __future__ import annotations

from scheduler.model import POOL_LABEL, Job, Node, Queue, Task, TaskState
from scheduler.pools import assign_pools, queue_pools


def test_one_pool_keeps_the_rule_for_a_selector_and_an_unknown_queue() -> None:
    nodes = [Node("n0", gpus=4, pool="p1"), Node("n1", gpus=4, pool="p1")]
    queues = [Queue("a", pool="p1")]
    jobs = [
        Job("run", "a", tasks=[Task("run-0", gpu=1, state=TaskState.RUNNING, node="n0")]),
        Job("new", "a", tasks=[Task("new-0", gpu=1)]),
        Job("asks", "a", tasks=[Task("asks-0", gpu=1)], node_selector={POOL_LABEL: "p2"}),
        Job(
            "asks-runs",
            "a",
            tasks=[Task("asks-runs-0", gpu=1, state=TaskState.RUNNING, node="n1")],
            node_selector={POOL_LABEL: "p2"},
        ),
        Job("lost", "nowhere", tasks=[Task("lost-0", gpu=1)]),
    ]
    placed = {j.name: j.pool for j in assign_pools(jobs, nodes, queue_pools(queues))}
    # the pool of the nodes its pods run on wins over its selector; an unknown queue keeps its own
    assert placed == {"run": "p1", "new": "p1", "asks": "p2", "asks-runs": "p1", "lost": "default"}
