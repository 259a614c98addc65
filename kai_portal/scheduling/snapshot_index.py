"""What one cycle's snapshot was built from: the rows behind each engine task and job.

The engine holds a job by its key ``<namespace>/<queue>/<name>`` and a task by ``<job key>/<pod
name>`` (``job_key``, ``task_key``), and calls them by their own names: two jobs of one name in two
queues are two jobs, and no name is changed to tell them apart. ``SnapshotIndex`` maps every key
back to its row (for writing the result and talking to the cluster) and words the engine's reasons
with the cluster's own names (``text``): a key never reaches a text. ``CycleInput`` is the
snapshot, the engine's configuration and the index.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import NamedTuple

import scheduler

DEFAULT_POOL = "default"


def job_key(namespace: str, queue: str, name: str) -> str:
    """A job's engine key. Kubernetes names hold no ``/``, so the parts never run together."""
    return f"{namespace}/{queue}/{name}"


def task_key(job: str, pod: str) -> str:
    """A task's engine key: its job's key and the pod's name."""
    return f"{job}/{pod}"


def distinct(key: str, row_id: object, taken: Container[str]) -> str:
    """``key``, or where another row already holds it (an ended job's releasing pods beside a new
    job of its name, or a pod name twice in a job), ``key#<row id>``: keys stay unique, names as
    they are."""
    return key if key not in taken else f"{key}#{row_id}"


class PodRef(NamedTuple):
    """The row behind one engine task (a named tuple: 50,000 of them per cycle at scale, and a
    frozen dataclass costs several times as much to make)."""

    pod_id: int
    job_id: int
    name: str  # the pod's own name (in the cluster)
    namespace: str
    state: str
    node_id: int | None
    reason: str


class JobRef(NamedTuple):
    """The row behind one engine job."""

    job_id: int
    name: str  # the job's own name (the pod group in the cluster)
    namespace: str
    queue_id: int
    message: str


@dataclass
class SnapshotIndex:
    """Engine keys back to rows, for writing the result and talking to the cluster."""

    tasks: dict[str, PodRef] = field(default_factory=dict)  # by task key
    jobs: dict[str, JobRef] = field(default_factory=dict)  # by job key
    queues: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    node_pools: dict[str, str] = field(default_factory=dict)
    # (node id, device index) -> GpuDevice id
    devices: dict[tuple[int, int], int] = field(default_factory=dict)
    capacity: dict[str, float] = field(default_factory=dict)
    # Jobs left out because their rows could not be converted (job id -> what was wrong):
    # the cycle fails them, so one bad row never stops scheduling for everyone.
    unhandled: dict[int, str] = field(default_factory=dict)
    # A large backlog (``backlog.py``): jobs listed with only part of their pending pods (job id ->
    # (job key, index of the last pending pod listed)), and per queue id the jobs this cycle
    # did not consider, with the reason their pending pods get.
    hidden: dict[int, tuple[str, int]] = field(default_factory=dict)
    left_out: dict[int, tuple[str, list[int]]] = field(default_factory=dict)
    # Jobs and tasks a preview added in memory, with no row behind them (the draft job of a fit
    # check): key -> name.
    drafts: dict[str, str] = field(default_factory=dict)
    # Reasons worded so far, by id (the reason is kept, so its id is not reused): one job message
    # is the reason of each of its pending pods, and is written as an event, a pod reason and history.
    _texts: dict[int, tuple[scheduler.Reason, str]] = field(default_factory=dict, repr=False)

    def shown(self, ref: scheduler.Ref) -> str:
        """A task or job as the cluster names it (``ref.key`` is the engine's key for it)."""
        row = self.jobs.get(ref.key) if ref.kind == "job" else self.tasks.get(ref.key)
        if row is not None:
            return row.name
        return self.drafts.get(ref.key, ref.key)

    def job_name(self, key: str) -> str:
        """The name of the job the engine keys ``key``."""
        return self.shown(scheduler.Ref(key, kind="job"))

    def text(self, reason: scheduler.Reason) -> str:
        """``reason`` worded as KAI words it, naming pods and workloads as the cluster does."""
        hit = self._texts.get(id(reason))
        if hit is not None and hit[0] is reason:
            return hit[1]
        text = scheduler.render(reason, self.shown)
        self._texts[id(reason)] = (reason, text)
        return text


@dataclass
class CycleInput:
    snapshot: scheduler.Snapshot
    config: scheduler.Config
    index: SnapshotIndex
    # The node pool this input is the shard of (a pool's cycle); None: the whole cluster.
    pool: str | None = None
