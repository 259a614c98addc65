"""Fit check before submitting: would this job start now, wait (for what), evict someone, or never fit?

``check_fit(user, fields, now)`` runs the engine on the cycle input the loop would
build now (``snapshot.build_snapshot``) plus the draft job, unsaved, with its pods
pending and named as ``submit`` names them, so the reason texts are the ones the
job will show after submitting. The verdict:

* ``starts_now``: the cycle allocates (binds) at least the job's gang minimum;
* ``needs_eviction``: the job is placed by evicting running jobs (reclaim from other
  queues, preempt in its own queue, or consolidation moves); the victims are named;
* ``waits``: it stays pending (the engine's reason says for what), or it is placed
  onto resources that are still being released;
* ``never_fits``: it stays pending even on an EMPTY cluster of the same nodes and
  queues (nothing running): more GPUs per task than any node of the pool, a pool
  without GPUs, more than the queue's limit (``OverLimit``), or a non-preemptible
  job above its queue's quota (``NonPreemptibleOverQuota``).

Nothing is written to the database.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError

from kai_portal.queues.models import Queue
from kai_portal.scheduling import engine
from kai_portal.scheduling.snapshot import alone_on_cluster, build_snapshot, with_extra_job
from kai_portal.scheduling.snapshot_index import CycleInput
from kai_portal.workloads.capacity import oversized_task_errors
from kai_portal.workloads.models import Job


class Verdict:
    STARTS_NOW = "starts_now"
    WAITS = "waits"
    NEEDS_EVICTION = "needs_eviction"
    NEVER_FITS = "never_fits"
    CHOICES = [STARTS_NOW, WAITS, NEEDS_EVICTION, NEVER_FITS]


REASON_CODES = ("OverLimit", "NonPreemptibleOverQuota", "PodSchedulingErrors", "PreemptionDelayNotElapsed",
                "QueueDoesNotExist")  # fmt: skip
REASON_MARKERS = (
    ("MaxNodePoolResources", "MaxNodePoolResources"),
    ("OverLimit", "quota has reached the allowable limit"),
    ("NonPreemptibleOverQuota", "Non-preemptible workload is over quota"),
)


@dataclass
class Victim:
    """A running job that would lose pods so that the draft job can start."""

    name: str
    uid: str
    queue: str
    action: str  # reclaim | preempt | consolidation
    tasks: int
    moved: bool  # consolidation: re-placed on another node, not stopped
    message: str


@dataclass
class FitVerdict:
    verdict: str
    summary: str
    reason: str = ""  # the engine's job (pod group) message, or the pod's reason
    reason_code: str = ""
    pod_reason: str = ""  # the first pending pod's reason
    detail: str = ""  # the line of the reason that names the cause (limit, quota, node size)
    # Why reclaim, preemption or consolidation could not make room (the engine's own notes;
    # KAI does not put them in the pod group's message, so they are shown apart from it).
    notes: list[str] = field(default_factory=list)
    tasks: int = 0
    placed: int = 0
    nodes: list[str] = field(default_factory=list)
    victims: list[Victim] = field(default_factory=list)


def check_fit(user: Any, fields: Mapping[str, Any] | Job, now: datetime) -> FitVerdict:
    """The verdict for a draft job; raises ``ValidationError`` for a job that could not be submitted.

    ``fields`` are the job's model fields (``queue`` a ``Queue``, ``node_pool`` a
    ``NodePool``), or an unsaved ``Job``. The queue must be one ``user`` may submit to.
    """
    job = fields if isinstance(fields, Job) else Job(**fields)
    if job.submitter_id is None and getattr(user, "pk", None) is not None:
        job.submitter = user
    if job.queue_id is None or not Queue.objects.submittable_by(user).filter(pk=job.queue_id).exists():
        raise ValidationError({"queue": ["Choose one of your team's leaf queues."]})
    job.full_clean(validate_unique=False)

    inp, key = with_extra_job(build_snapshot(now), job, now)
    engine_job = inp.snapshot.jobs[-1]
    result = engine.run_cycle(copy.deepcopy(inp.snapshot), inp.config)
    outcomes = [result.tasks.get(t.key) for t in engine_job.tasks]
    allocated = [o for o in outcomes if o and o.status == engine.TaskState.ALLOCATED]
    pipelined = [o for o in outcomes if o and o.status == engine.TaskState.PIPELINED]
    out = FitVerdict(verdict=Verdict.WAITS, summary="", tasks=len(engine_job.tasks))
    out.placed = len(allocated) + len(pipelined)
    out.nodes = sorted({o.node for o in allocated + pipelined if o.node})
    _reasons(out, inp, result, engine_job)
    victims = [e for e in result.evictions if e.evictor_job == key]
    out.victims = _victims(inp, victims)
    gang = max(engine_job.gang_min, 1)

    if out.placed >= gang and not pipelined:
        out.verdict = Verdict.STARTS_NOW
        out.reason = out.reason_code = out.pod_reason = out.detail = ""
        out.summary = f"Starts now: {_n(len(allocated), 'task')} fit on {', '.join(out.nodes)}."
    elif out.placed >= gang and out.victims:
        out.verdict = Verdict.NEEDS_EVICTION
        out.summary = _eviction_summary(out.victims)
    elif out.placed >= gang:
        out.summary = "Waits a moment: it fits onto resources that running jobs are releasing now."
    else:
        empty_result = alone_on_cluster(inp, engine_job)
        if len(empty_result.placed(t.key for t in engine_job.tasks)) < gang:
            out.verdict = Verdict.NEVER_FITS
            _reasons(out, inp, empty_result, engine_job)
            out.summary = _never_summary(out, job)
            oversized = oversized_task_errors(job)
            if oversized and out.reason_code not in ("OverLimit", "MaxNodePoolResources"):
                # The engine names the first check that failed on each node ("GPU memory"), behind
                # the reclaim and preempt attempts; the pool's node sizes say it plainly.
                out.summary = f"Can never fit: no node in the {job.queue.node_pool.name} pool is that big."
                out.detail = " ".join(oversized.values())
            elif out.reason_code != "MaxNodePoolResources":
                out.summary += _node_size_note(inp, engine_job)
        else:
            out.summary = _wait_summary(out, job)
    return out


def _reasons(out: FitVerdict, inp: CycleInput, result: engine.CycleResult, job: engine.Job) -> None:
    """The engine's reasons for the draft job, worded as the cycle words them (``index.text``)."""
    text = inp.index.text
    pod_reasons = [o.reason for t in job.tasks if (o := result.tasks.get(t.key)) and o.reason]
    out.pod_reason = text(pod_reasons[0]) if pod_reasons else ""
    job_reason = result.job_messages.get(job.key)
    out.reason = text(job_reason) if job_reason is not None else out.pod_reason
    out.notes = [text(note) for note in result.job_notes.get(job.key, [])]
    # KAI's code heads the job message; a pod's own text has none (``Unschedulable``).
    code = job_reason.code if job_reason is not None else ""
    out.reason_code = code if code in REASON_CODES else ""
    # A job message may join the errors of several actions; the queue and node texts name the cause.
    both = out.reason + "\n" + out.pod_reason
    out.detail = ""
    for code, marker in REASON_MARKERS:
        if marker in both:
            out.reason_code = code
            line = next(x for x in both.splitlines() if marker in x)
            out.detail = line.split("MaxNodePoolResources: ", 1)[-1].strip().removeprefix(code + ": ")
            break


def _victims(inp: CycleInput, evictions: list[engine.Eviction]) -> list[Victim]:
    by_job: dict[str, list[engine.Eviction]] = {}
    for e in evictions:
        by_job.setdefault(e.job, []).append(e)
    ids = {inp.index.jobs[k].job_id for k in by_job if k in inp.index.jobs}
    rows = {j.pk: j for j in Job.objects.filter(pk__in=ids)}
    out = []
    for key, items in by_job.items():
        ref = inp.index.jobs.get(key)
        row = rows.get(ref.job_id) if ref else None
        out.append(
            Victim(
                name=row.name if row else inp.index.job_name(key),
                uid=str(row.uid) if row else "",
                queue=items[0].queue,
                action=items[0].action,
                tasks=len(items),
                moved=all(e.moved_to is not None for e in items),
                message=inp.index.text(items[0].message),
            )
        )
    return sorted(out, key=lambda v: (v.queue, v.name))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _eviction_summary(victims: list[Victim]) -> str:
    stopped = [v for v in victims if not v.moved]
    moved = [v for v in victims if v.moved]
    parts = []
    for action in ("reclaim", "preempt"):
        chosen = [v for v in stopped if v.action == action]
        if chosen:
            verb = "reclaiming from" if action == "reclaim" else "preempting in"
            queues = ", ".join(sorted({v.queue for v in chosen}))
            parts.append(f"{verb} {queues}: {', '.join(v.name for v in chosen)}")
    if moved:
        parts.append(f"moving {', '.join(v.name for v in moved)} to other nodes (consolidation)")
    return "Starts after evicting running work — " + "; ".join(parts) + "."


def _wait_summary(out: FitVerdict, job: Job) -> str:
    if out.reason_code == "OverLimit":
        return f"Waits: queue {job.queue.name} is at its limit; it starts when its running jobs finish."
    if out.reason_code == "NonPreemptibleOverQuota":
        return (
            f"Waits: non-preemptible jobs of {job.queue.name} already use its quota; it starts when some "
            "of them finish (or make it preemptible)."
        )
    if out.reason_code == "PreemptionDelayNotElapsed":
        return "Waits: its preemption delay has not passed yet."
    return (
        "Waits for free resources: no node has room for it now, and no running job may be reclaimed or "
        "preempted for it."
    )


def _node_size_note(inp: CycleInput, job: engine.Job) -> str:
    """The engine reports the first failed check only; say so when the node size fails too."""
    nodes = [n for n in inp.snapshot.nodes if n.pool == job.pool and not n.unschedulable]
    most = max((n.gpus for n in nodes), default=0)
    want = max((t.whole_gpus for t in job.tasks), default=0)
    if want > most:
        return f" Also, no node in the {job.pool} pool has more than {most} GPUs."
    return ""


def _never_summary(out: FitVerdict, job: Job) -> str:
    pool = job.queue.node_pool.name
    if out.reason_code == "OverLimit":
        return f"Can never fit: it asks for more than the limit of queue {job.queue.name} (or a parent)."
    if out.reason_code == "NonPreemptibleOverQuota":
        return (
            f"Can never fit: a non-preemptible job may not exceed the quota of {job.queue.name}; "
            "make it preemptible to go over quota."
        )
    if "has GPU resources" in out.reason + out.pod_reason:
        return f"Can never fit: no node in the {pool} pool has GPUs."
    if "topped at" in out.reason + out.pod_reason:
        return f"Can never fit: no node in the {pool} pool is that big (see the reason below)."
    return "Can never fit, even on an empty cluster of the same nodes (see the reason below)."
