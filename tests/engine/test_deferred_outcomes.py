"""A cycle that changes nothing makes the outcomes of the pods that run as loaded only when its
result is read (``result.Deferred``): what is read must be what writing them all at once gives."""

from __future__ import annotations

import copy
import pickle

from scheduler import run_cycle
from scheduler.bench.workloads import GPUS_PER_NODE, reclaim_snapshot
from scheduler.model import Snapshot, TaskState
from scheduler.result import Deferred


def _unplaceable(n: int = 10) -> Snapshot:
    return reclaim_snapshot(n, victim_quota=n * GPUS_PER_NODE - 79, gang_tasks=10)


def test_running_outcomes_are_made_when_read_in_job_order() -> None:
    snap = _unplaceable()
    result = run_cycle(snap)
    assert isinstance(result.tasks, Deferred) and result.tasks._fills  # nothing made yet
    keys = [t.key for j in snap.jobs for t in j.tasks]
    assert list(result.tasks) == keys
    for job in snap.jobs:
        for t in job.tasks:
            out = result.tasks[t.key]
            assert out.job == job.key
            if t.state == TaskState.RUNNING:
                assert (out.status, out.node, out.gpu_devices) == (TaskState.RUNNING, t.node, t.gpu_devices)
            else:
                assert out.status == TaskState.PENDING and out.reason is not None
    assert result.counters["pending"] == 10


def test_deferred_dict_reads_like_a_dict() -> None:
    snap = _unplaceable()
    result = run_cycle(snap)
    assert len(result.tasks) == sum(len(j.tasks) for j in snap.jobs)
    plain = dict(result.tasks)
    assert result.tasks == plain and plain == result.tasks
    assert pickle.loads(pickle.dumps(result.tasks)) == plain
    assert copy.deepcopy(result.tasks).keys() == plain.keys()
    rooms = run_cycle(_unplaceable()).node_room
    assert [r.idle_gpus for r in rooms["default"]] == [0] * 10


def test_writes_after_deferred_fills_keep_their_order() -> None:
    d: Deferred[int] = Deferred()
    d.defer(lambda out: dict.__setitem__(out, "a", 1))
    d["b"] = 2  # the fill runs first
    d.defer(lambda out: dict.update(out, {"a": 3, "c": 4}))
    assert list(d.items()) == [("a", 3), ("b", 2), ("c", 4)]
