"""Why a pending job can never start: the engine's cycle with the job alone on the cluster.

Shared by the forecast (estimated start) and the fairness audit, so that a job held back
by its queue's limit is not described as too big for every node, and a job that can
never start is not counted as a queue's unmet demand.
"""

from __future__ import annotations

import scheduler
from kai_portal.scheduling.snapshot import CycleInput, alone_on_cluster

# Marker texts of KAI's job messages (scheduler/ reasons) → what the user is told.
OVER_LIMIT = "quota has reached the allowable limit"
NON_PREEMPTIBLE = "Non-preemptible workload is over quota"


def never_fits_reason(inp: CycleInput, job: scheduler.Job) -> str | None:
    """None when ``job`` is placed on an empty cluster; otherwise why it is not, in a phrase
    ("it ...") that follows "unknown:" on the job page."""
    result = alone_on_cluster(inp, job)
    placed = result.placed(t.name for t in job.tasks)
    if len(placed) >= max(1, min(job.gang_min, len(job.tasks))):
        return None
    texts = [result.job_messages.get(job.name, "")]
    texts += [o.reason for t in job.tasks if (o := result.tasks.get(t.name)) and o.reason]
    text = "\n".join(texts)
    if OVER_LIMIT in text:
        return "it asks for more than its queue's limit (or a parent queue's), so it never starts as it is"
    if NON_PREEMPTIBLE in text:
        return "it is non-preemptible and asks for more than its queue's quota, so it never starts as it is"
    return "it does not fit anywhere, even on an empty cluster"


def queues_whose_demand_never_fits(inp: CycleInput, queue_ids: set[int]) -> set[int]:
    """Those of ``queue_ids`` that have pending jobs now, none of which could ever start
    (each is refused even on an empty cluster): their unmet demand is not a fairness problem."""
    pending: dict[int, list[scheduler.Job]] = {}
    for job in inp.snapshot.jobs:
        ref = inp.index.jobs.get(job.name)
        if ref is None or ref.queue_id not in queue_ids:
            continue
        if any(t.state == scheduler.TaskState.PENDING for t in job.tasks):
            pending.setdefault(ref.queue_id, []).append(job)
    # any(): stop at the first job of a queue that could start.
    return {qid for qid, jobs in pending.items() if not any(never_fits_reason(inp, j) is None for j in jobs)}
