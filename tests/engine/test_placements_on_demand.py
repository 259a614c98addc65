"""A running pod on its pinned whole GPUs gets no placement object at load (``state.Placements``):
one is made, with the charge the load gave it, the first time something reads it; every other
task has one stored, and a key of no task held has none."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler.cycle import open_session
from scheduler.session import Session
from scheduler.state import Placement


def _snapshot() -> Snapshot:
    queues = [Queue("root"), Queue("a", parent="root", resources={"gpu": QueueResource(8, -1, 1)})]
    run = Task(
        "run-0",
        gpu=2,
        cpu_millis=500,
        memory_mib=1024,
        state=TaskState.RUNNING,
        node="n0",
        gpu_devices=(1, 2),
    )
    unpinned = Task(
        "free-0", gpu=1, state=TaskState.RUNNING, node="n0"
    )  # no device named: loaded the slow way
    jobs = [
        Job("run", "a", tasks=[run], last_start_s=60),
        Job("free", "a", tasks=[unpinned], last_start_s=60),
        Job("new", "a", tasks=[Task("new-0", gpu=4)]),
    ]
    return Snapshot([Node("n0", gpus=4), Node("n1", gpus=4)], queues, jobs)


def test_a_pinned_running_pod_has_its_placement_made_when_first_read() -> None:
    session = open_session(_snapshot(), Config(), "default")
    placements = session.placements
    assert "run-0" not in placements and placements.get("run-0") is None  # nothing built at load
    assert placements.deferring
    made = placements["run-0"]
    assert made == Placement(
        TaskState.RUNNING, "n0", (1, 2), 0.0, {"gpu": 2.0, "cpu": 500.0, "memory": 1024.0}
    )
    assert placements.get("run-0") is made  # kept: read twice, one object
    assert placements.on_demand("run-0") is None  # it has a stored one now


def test_the_other_tasks_have_theirs_stored_and_an_unknown_key_has_none() -> None:
    session = open_session(_snapshot(), Config(), "default")
    placements = session.placements
    assert dict.get(placements, "free-0") == Placement(
        TaskState.RUNNING, "n0", (0,), 0.0, {"gpu": 1.0, "cpu": 0.0, "memory": 0.0}
    )
    assert dict.get(placements, "new-0") == Placement(TaskState.PENDING)
    assert placements.on_demand("nobody-0") is None
    assert placements.get("nobody-0") is None
    try:
        placements["nobody-0"]
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown key has no placement")


def test_a_pod_read_off_its_task_and_one_made_on_demand_give_one_outcome() -> None:
    """The cycle's result reads an unread pod off its task (``cycle._collect``): the same outcome
    as its placement, made on demand, gives."""
    snap = _snapshot()
    result = run_cycle(snap, Config())
    out = result.tasks["run-0"]
    assert (out.status, out.node, out.gpu_devices) == (TaskState.RUNNING, "n0", (1, 2))
    session = open_session(snap, Config(), "default")
    p = session.placements["run-0"]
    assert (p.status, p.node, p.devices) == (out.status, out.node, out.gpu_devices)
    assert result.tasks["new-0"].status == TaskState.ALLOCATED  # on n1: n0 has one GPU left


def test_a_session_not_loaded_holds_no_deferred_placement() -> None:
    snap = _snapshot()
    session = Session("default", Config(), snap.nodes, snap.queues, snap.jobs)
    assert not session.placements.deferring
    assert session.placements.on_demand("run-0") is None
