"""The job page's answer to "why am I waiting, and what would change it", from what the last
cycle's engine found (``Job.blockers``, written by ``scheduling/blockers.py``): nothing here
re-derives a decision; it only words the engine's numbers and says which change they point to."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kai_portal.core import units
from kai_portal.workloads.models import Job

_UNIT = {"gpu": "GPUs", "cpu": "CPU cores", "memory": "GB of memory"}


def _amount(resource: str, value: float) -> str:
    """An amount in user units, integers without decimals ("8", "0.5", "12.3")."""
    if resource == "cpu":
        value = value / 1000
    elif resource == "memory":
        value = value * 1048576 / 1e9
    return str(units.plain_number(round(value, 3)))


@dataclass
class Protected:
    job: str  # shown name ("" when the user may not see it)
    uid: str  # for the link ("" when not visible)
    queue: str
    action: str
    until: datetime
    surplus_only: bool


@dataclass
class WaitAnswer:
    protected: list[Protected] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # "queue a uses 8 GPUs, fair share 4"
    limits: list[str] = field(default_factory=list)  # the limit or quota it would cross, with numbers
    notes: list[str] = field(default_factory=list)  # the eviction actions' own notes
    changes: list[str] = field(default_factory=list)  # what would change it

    def __bool__(self) -> bool:
        return bool(self.protected or self.sources or self.limits or self.notes or self.changes)


def answer(job: Job, visible: Any) -> WaitAnswer:
    """The answer for ``job``'s page; ``visible`` is the queryset of jobs the reader may see."""
    out = WaitAnswer()
    items = (job.blockers or {}).get("items", []) if job.state == "pending" else []
    ids = [i["job_id"] for i in items if i.get("kind") == "protected" and i.get("job_id")]
    uids = dict(visible.filter(pk__in=ids).values_list("pk", "uid")) if ids else {}
    for i in items:
        kind = i.get("kind")
        if kind == "protected":
            uid = uids.get(i.get("job_id"))
            out.protected.append(
                Protected(
                    job=i["job"] if uid else "", uid=str(uid or ""), queue=i["queue"], action=i["action"],
                    until=datetime.fromisoformat(i["until"]), surplus_only=bool(i.get("surplus_only")),
                )
            )  # fmt: skip
        elif kind == "source":
            used, share = i["used"].get("gpu", 0.0), i["fair_share"].get("gpu", 0.0)
            out.sources.append(
                f"queue {i['queue']} uses {_amount('gpu', used)} GPUs with a fair share of "
                f"{_amount('gpu', share)}: reclaim may take from it"
            )
        elif kind in ("limit", "quota"):
            out.limits.append(i["text"])
            out.changes.extend(_limit_changes(i))
        elif kind == "smaller":
            out.changes.append(_smaller(i))
        elif kind == "pool":
            out.changes.append(_other_pool(i))
        else:
            out.notes.append(i["text"])
    if out.protected:
        first = min(p.until for p in out.protected)
        becomes = "reclaimable" if out.protected[0].action == "reclaim" else "preemptible"
        out.changes.append(
            f"Time: the first protected job becomes {becomes} "
            f"at {first:%Y-%m-%d %H:%M:%S} UTC; the scheduler can take from it at its next cycle after that."
        )
    return out


def _pods(pods: int, gpus: int) -> str:
    return f"its {gpus} GPUs" if pods == 1 else f"its {pods} pods of {gpus} GPUs each"


def _smaller(i: dict[str, Any]) -> str:
    """The most GPUs per pod that fit in the job's pool now (``scheduling/blockers.py``, kind "smaller")."""
    pods, gpus, pool = i["pods"], i["gpus"], i["pool"]
    if gpus <= 0:
        return (
            f"A smaller request does not help now: no node of pool {pool} that this job may use "
            "has an idle whole GPU."
        )
    each = (
        f"a pod of at most {gpus} GPUs fits" if pods == 1 else f"{pods} pods of at most {gpus} GPUs each fit"
    )
    return f"A smaller request: {each} in pool {pool} now (it asks for {i['requested']} per pod)."


def _other_pool(i: dict[str, Any]) -> str:
    """Another pool where the whole request fits now (kind "pool")."""
    nodes, pool = i["nodes"], i["pool"]
    where = "one node" if nodes == 1 else f"{nodes} nodes"
    return (
        f"Another pool: pool {pool} has {i['idle']} idle whole GPUs on {where} this job may use, "
        f"enough for {_pods(i['pods'], i['requested'])} now; moving needs a queue in pool {pool}."
    )


def _limit_changes(i: dict[str, Any]) -> list[str]:
    """What would let a job over a limit or a non-preemptible quota start, from the engine's numbers."""
    r, queue = i["resource"], i["queue"]
    unit = _UNIT.get(r, r)
    if i["kind"] == "limit":
        limit, allocated, requested = i["limit"], i["allocated"], i["requested"]
        short = allocated + requested - limit
        room = max(0.0, limit - allocated)
        return [
            f"A higher limit: queue {queue}'s {unit} limit raised by {_amount(r, short)} "
            f"(from {_amount(r, limit)} to {_amount(r, limit + short)}).",
            f"A smaller request: at most {_amount(r, room)} {unit} fits within the limit now."
            if room > 0
            else f"A smaller request does not help now: queue {queue} has no {unit} left under its limit.",
        ]
    quota, allocated, requested = i["quota"], i["allocated"], i["requested"]
    short = allocated + requested - quota
    room = max(0.0, quota - allocated)
    return [
        f"A larger quota: queue {queue}'s {unit} quota raised by {_amount(r, short)} "
        f"(from {_amount(r, quota)} to {_amount(r, quota + short)}).",
        "A preemptible job: only non-preemptible jobs are held to the quota.",
        f"A smaller request: at most {_amount(r, room)} {unit} fits within the quota now."
        if room > 0
        else f"A smaller request does not help now: queue {queue}'s non-preemptible jobs use its quota.",
    ]
