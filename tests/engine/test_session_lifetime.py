"""A cycle's session is freed when the cycle lets go of it, not by the cyclic collector: at 1,000
nodes it holds one placement per pod and one device per GPU, which a collector pass would walk
first (``Session.close``). And ``Session.task_job``, made on first use, maps every task."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler.cycle import open_session
from scheduler.node_index import index_of
from scheduler.session import Session


def _snapshot() -> Snapshot:
    queues = [Queue("root"), Queue("a", parent="root", resources={"gpu": QueueResource(4, -1, 1)})]
    jobs = [
        Job("run", "a", tasks=[Task("run-0", gpu=1, state=TaskState.RUNNING, node="n0", gpu_devices=(0,))]),
        Job("new", "a", tasks=[Task("new-0", gpu=2), Task("new-1", gpu=1)]),
    ]
    return Snapshot([Node("n0", gpus=4), Node("n1", gpus=4)], queues, jobs)


@contextmanager
def _no_collector() -> Iterator[None]:
    gc.collect()  # sessions left by earlier tests
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_a_closed_session_is_freed_by_reference_counting() -> None:
    with _no_collector():
        session = open_session(_snapshot(), Config(), "default")
        index_of(session)  # the node index refers back to its session
        gone = weakref.ref(session)
        session.close()
        del session
        assert gone() is None


def test_an_open_session_with_a_node_index_waits_for_the_collector() -> None:
    """The other side of the test above: without ``close`` the session outlives its last name."""
    with _no_collector():
        session = open_session(_snapshot(), Config(), "default")
        index_of(session)
        gone = weakref.ref(session)
        del session
        assert gone() is not None
    gc.collect()
    assert gone() is None


def test_run_cycle_leaves_no_session_for_the_collector() -> None:
    with _no_collector():
        result = run_cycle(_snapshot(), Config())
        # type(), not isinstance(): a dead weakref proxy left by another test raises on __class__
        left = [o for o in gc.get_objects() if type(o) is Session]
    assert result.tasks["new-0"].status == TaskState.ALLOCATED  # placed through the node index
    assert left == []


def test_task_job_maps_every_task_to_its_job() -> None:
    snap = _snapshot()
    session = open_session(snap, Config(), "default")
    assert session.task_job == {t.key: j for j in snap.jobs for t in j.tasks}
    assert session.task_job is session.task_job  # made once
