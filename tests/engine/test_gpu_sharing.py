"""Multi-device fractions (gpu-fraction-num-devices) and the reservation pod's pod slot."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle

ALLOCATE = Config(actions=("allocate",))
Q = Queue("q", resources={"gpu": QueueResource(0, -1, 1)})


def _job(name: str, gpu: float, devices: int = 1, created_s: float = 0, **task: object) -> Job:
    t = Task(f"{name}-0", gpu=gpu, gpu_fraction_devices=devices, **task)  # type: ignore[arg-type]
    return Job(name, queue="q", tasks=[t], created_s=created_s)


def test_multi_device_fraction_takes_that_many_devices_of_one_node() -> None:
    r = run_cycle(Snapshot([Node("n0", gpus=4)], [Q], [_job("m", 0.5, devices=2)]), ALLOCATE)
    out = r.tasks["m-0"]
    assert out.status == TaskState.ALLOCATED
    assert len(out.gpu_devices) == 2 and len(set(out.gpu_devices)) == 2
    assert r.queues["q"].allocated["gpu"] == 1.0


def test_multi_device_fraction_needs_the_devices_on_one_node() -> None:
    # Two nodes with one GPU each: two devices exist, but not on one node.
    nodes = [Node("n0", gpus=1), Node("n1", gpus=1)]
    r = run_cycle(Snapshot(nodes, [Q], [_job("m", 0.5, devices=2)]), ALLOCATE)
    assert r.tasks["m-0"].status == TaskState.PENDING
    assert "GPUs" in (r.tasks["m-0"].text() or "")


def test_running_multi_device_fraction_holds_both_devices() -> None:
    running = _job("m", 0.75, devices=2, state=TaskState.RUNNING, node="n0", gpu_devices=(0, 1))
    # 0.5 fits neither half-used device (0.25 left on each); only the idle third one.
    r = run_cycle(Snapshot([Node("n0", gpus=3)], [Q], [running, _job("f", 0.5, created_s=-1)]), ALLOCATE)
    assert r.tasks["f-0"].gpu_devices == (2,)
    assert r.queues["q"].allocated["gpu"] == 2.0


def test_reservation_slot_is_given_back_when_the_group_closes() -> None:
    # One GPU, three slots: a running 0.5 (+ its reservation pod) leaves one slot. A pending
    # whole-GPU job cannot use the device; a 0.5 joins the existing group and needs no new slot.
    running = _job("r", 0.5, state=TaskState.RUNNING, node="n0", gpu_devices=(0,))
    snap = Snapshot([Node("n0", gpus=2, max_pods=3)], [Q], [running, _job("a", 0.25, created_s=-1)])
    r = run_cycle(snap, ALLOCATE)
    assert r.tasks["a-0"].status == TaskState.ALLOCATED and r.tasks["a-0"].gpu_devices == (0,)
    # The same with a task that would open a second group: slot for it, none for its reservation.
    snap = Snapshot([Node("n0", gpus=2, max_pods=3)], [Q], [running, _job("b", 0.75, created_s=-1)])
    r = run_cycle(snap, ALLOCATE)
    assert r.tasks["b-0"].status == TaskState.PENDING
    assert r.tasks["b-0"].text() and "pod number exceeded" in r.tasks["b-0"].text()
