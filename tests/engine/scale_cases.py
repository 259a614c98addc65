"""KAI's reclaim benchmark shapes (issue 4): shared by the scale tests and the timing script."""

from __future__ import annotations

from scheduler import Job, Node, Queue, QueueResource, Snapshot, Task, TaskState


def reclaim_big_gang(n: int, reclaimable: int | None = None, gang_tasks: int | None = None) -> Snapshot:
    """N nodes x 8 GPUs filled by 8N one-GPU jobs of queue ``low``; a gang of 8-GPU tasks from
    queue ``high``. Case (a): ``high`` deserves the whole cluster, gang of N/2 tasks. Case (b):
    ``low`` may lose only ``reclaimable`` GPUs (its quota), gang of ``gang_tasks`` tasks."""
    nodes = [Node(f"n{i:05d}", gpus=8) for i in range(n)]
    total = 8 * n
    low_quota = 0 if reclaimable is None else total - reclaimable
    high_quota = total if reclaimable is None else 8 * (gang_tasks or 10)
    queues = [
        Queue("dept", resources={"gpu": QueueResource(-1, -1, 1)}),
        Queue("low", parent="dept", created_index=1, resources={"gpu": QueueResource(low_quota, -1, 0)}),
        Queue("high", parent="dept", created_index=2, resources={"gpu": QueueResource(high_quota, -1, 1)}),
    ]
    jobs = []
    for i in range(n):
        for g in range(8):
            k = i * 8 + g
            jobs.append(
                Job(
                    f"small-{k:06d}",
                    "low",
                    priority=50,
                    created_s=float(8 * n - k),
                    last_start_s=3600.0,
                    tasks=[Task(f"small-{k:06d}-0", gpu=1, state=TaskState.RUNNING, node=nodes[i].name)],
                )
            )
    size = gang_tasks if gang_tasks is not None else n // 2
    jobs.append(Job("gang", "high", priority=50, tasks=[Task(f"gang-{i}", gpu=8) for i in range(size)]))
    return Snapshot(nodes, queues, jobs)
