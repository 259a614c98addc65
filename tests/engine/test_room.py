"""What idle room a cycle leaves (``CycleResult.node_room``) and where a pending job would fit on it
(``scheduler.room``): the most GPUs per pod in its own pool, or its whole request in another pool,
under the job's node selector as the engine applies it."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, room, run_cycle

R = TaskState.RUNNING
POOL = "kai.scheduler/node-pool"


def q(name: str, pool: str | None = None) -> Queue:
    return Queue(name, pool=pool, resources={"gpu": QueueResource(-1, -1, 1)})


def _cycle(nodes: list[Node], queues: list[Queue], jobs: list[Job]):  # type: ignore[no-untyped-def]
    return run_cycle(Snapshot(nodes, queues, jobs), Config(actions=("allocate",)))


def test_node_room_is_what_stays_idle_after_the_cycle_per_pool() -> None:
    nodes = [Node("a1", gpus=8, pool="a"), Node("b1", gpus=8, pool="b"), Node("b2", gpus=4, pool="b")]
    jobs = [Job("run", "qa", tasks=[Task("run-0", gpu=6, state=R, node="a1")]),
            Job("new", "qb", tasks=[Task("new-0", gpu=3)])]  # fmt: skip
    r = _cycle(nodes, [q("qa", "a"), q("qb", "b")], jobs)
    idle = {p: {x.node.name: x.idle_gpus for x in rooms} for p, rooms in r.node_room.items()}
    assert idle == {"a": {"a1": 2}, "b": {"b1": 8, "b2": 1}}  # new-0 binpacked onto b2
    assert "node_room" not in r.to_json()


def test_smaller_request_is_the_most_gpus_per_pod_that_all_pods_fit() -> None:
    nodes = [Node("a1", gpus=8, pool="a"), Node("a2", gpus=8, pool="a")]
    held = [Task("r-0", gpu=5, state=R, node="a1"), Task("r-1", gpu=2, state=R, node="a2")]
    jobs = [Job("run", "qa", tasks=held), Job("want", "qa", tasks=[Task(f"w-{i}", gpu=8) for i in range(2)])]
    r = _cycle(nodes, [q("qa", "a")], jobs)
    assert r.tasks["w-0"].status == TaskState.PENDING
    want = jobs[1]
    shape = room.room_shape(want, want.tasks)
    assert shape == room.RoomShape(2, 8, 0.0, 0.0)
    own = room.room_eligible(want, r.node_room["a"])
    assert room.room_fits(want, shape, own) is None
    # idle: a1 3, a2 6 -> two pods of 3 fit (a1 and a2); two of 4 do not (a1 has 3)
    assert room.largest_per_pod(want, shape, own) == 3


def test_another_pool_fits_the_whole_request_only_on_nodes_its_selector_allows() -> None:
    h100 = {"nvidia.com/gpu.product": "H100"}
    nodes = [Node("a1", gpus=8, pool="a", labels=h100),
             Node("b1", gpus=8, pool="b", labels={"nvidia.com/gpu.product": "A100"}),
             Node("c1", gpus=8, pool="c", labels=h100)]  # fmt: skip
    want = Job("want", "qa", node_selector=dict(h100), tasks=[Task("w-0", gpu=8)])
    jobs = [Job("run", "qa", tasks=[Task("r-0", gpu=8, state=R, node="a1")]), want]
    r = _cycle(nodes, [q("qa", "a"), q("qb", "b"), q("qc", "c")], jobs)
    assert r.tasks["w-0"].status == TaskState.PENDING and r.tasks["w-0"].pool == "a"
    shape = room.room_shape(want, want.tasks)
    assert shape is not None
    assert room.room_fits(want, shape, room.room_eligible(want, r.node_room["b"])) is None  # wrong GPU type
    assert room.room_fits(want, shape, room.room_eligible(want, r.node_room["c"])) == ["c1"]
    # asking for pool a by label does not keep it from pool c (the pool is what moving changes)
    pinned = Job("want", "qa", node_selector={**h100, POOL: "a"}, tasks=[Task("w-0", gpu=8)])
    assert room.room_fits(pinned, shape, room.room_eligible(pinned, r.node_room["c"])) == ["c1"]


def test_no_answer_for_fractional_or_mixed_pods() -> None:
    frac = Job("f", "qa", tasks=[Task("f-0", gpu=0.5)])
    mixed = Job("m", "qa", tasks=[Task("m-0", gpu=8), Task("m-1", gpu=4)])
    assert room.room_shape(frac, frac.tasks) is None and room.room_shape(mixed, mixed.tasks) is None
