"""What one cycle's snapshot was built from: the rows behind each engine task and job.

``SnapshotIndex`` maps every engine key back to its row (for writing the result and talking to
the cluster) and words the engine's reasons with the cluster's own names (``text``): a key
never reaches a text. ``CycleInput`` is the snapshot, the engine's configuration and the index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import scheduler

DEFAULT_POOL = "default"


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
    """Engine names back to rows, for writing the result and talking to the cluster."""

    tasks: dict[str, PodRef] = field(default_factory=dict)
    jobs: dict[str, JobRef] = field(default_factory=dict)
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
    # (engine name, index of the last pending pod listed)), and per queue id the jobs this cycle
    # did not consider, with the reason their pending pods get.
    hidden: dict[int, tuple[str, int]] = field(default_factory=dict)
    left_out: dict[int, tuple[str, list[int]]] = field(default_factory=dict)
    # Reasons worded so far, by id (the reason is kept, so its id is not reused): one job message
    # is the reason of each of its pending pods, and is written as an event, a pod reason and history.
    _texts: dict[int, tuple[scheduler.Reason, str]] = field(default_factory=dict, repr=False)

    def shown(self, ref: scheduler.Ref) -> str:
        """A task or job as the cluster names it (``ref.key`` is the engine's key for it)."""
        row = self.jobs.get(ref.key) if ref.kind == "job" else self.tasks.get(ref.key)
        return ref.key if row is None else row.name

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
