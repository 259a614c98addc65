"""Why a pending job can never start: the engine's cycle with the job alone on the cluster.

Used by the forecast's fit check (stored as ``unknown = never_fits``, which the fairness
audit reads), so that a job held back by its queue's limit is not described as too big
for every node, and a job that can never start is not counted as a queue's unmet demand.
"""

from __future__ import annotations

from kai_portal.scheduling import engine
from kai_portal.scheduling.snapshot import alone_on_cluster
from kai_portal.scheduling.snapshot_index import CycleInput

# Marker texts of KAI's job messages (scheduler/ reasons) → what the user is told.
OVER_LIMIT = "quota has reached the allowable limit"
NON_PREEMPTIBLE = "Non-preemptible workload is over quota"


def never_fits_reason(inp: CycleInput, job: engine.Job) -> str | None:
    """None when ``job`` is placed on an empty cluster; otherwise why it is not, in a phrase
    ("it ...") that follows "unknown:" on the job page."""
    result = alone_on_cluster(inp, job)
    placed = result.placed(t.key for t in job.tasks)
    if len(placed) >= max(1, min(job.gang_min, len(job.tasks))):
        return None
    texts = [result.job_message(job.key, inp.index.shown) or ""]
    texts += [inp.index.text(o.reason) for t in job.tasks if (o := result.tasks.get(t.key)) and o.reason]
    text = "\n".join(texts)
    if OVER_LIMIT in text:
        return "it asks for more than its queue's limit (or a parent queue's), so it never starts as it is"
    if NON_PREEMPTIBLE in text:
        return "it is non-preemptible and asks for more than its queue's quota, so it never starts as it is"
    return "it does not fit anywhere, even on an empty cluster"
