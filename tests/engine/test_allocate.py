"""Allocation rules of the allocate action, and the texts pending tasks carry."""

from __future__ import annotations

import pytest

from scheduler import (
    Config,
    CycleResult,
    Job,
    Node,
    Queue,
    QueueResource,
    Snapshot,
    Task,
    TaskState,
    TopologyConstraint,
    run_cycle,
    run_rounds,
)

ALLOCATE = Config(actions=("allocate",))


def queue(
    name: str = "q", quota: float = 0, limit: float = -1, parent: str | None = None, index: int = 0
) -> Queue:
    return Queue(name, parent=parent, created_index=index, resources={"gpu": QueueResource(quota, limit, 1)})


def job(
    name: str, n: int = 1, gpu: float = 1, q: str = "q", min_available: int | None = None, **kw: object
) -> Job:
    tasks = [Task(f"{name}-{i}", gpu=gpu) for i in range(n)]
    return Job(name, queue=q, tasks=tasks, min_available=min_available, **kw)  # type: ignore[arg-type]


def run(
    nodes: list[Node], jobs: list[Job], queues: list[Queue] | None = None, config: Config = ALLOCATE
) -> CycleResult:
    return run_cycle(Snapshot(nodes, queues or [queue()], jobs), config)


def status(result: CycleResult, task: str) -> TaskState:
    return result.tasks[task].status


def test_gang_is_all_or_nothing() -> None:
    r = run([Node("n0", gpus=3)], [job("g", n=4, min_available=4)])
    assert all(status(r, f"g-{i}") == TaskState.PENDING for i in range(4))
    # The pod that found no node says its own fit error (KAI's pod event); the gang's text is the job's.
    assert r.tasks["g-3"].text() == (
        "no nodes with enough resources were found: 1 node(s) didn't have enough resources: GPUs."
    )
    assert r.job_message("g") == (
        "PodSchedulingErrors: Resources were found for 3 pods while 4 are required for gang scheduling. "
        "Additional pods cannot be scheduled due to: no nodes with enough resources were found: "
        "1 node(s) didn't have enough resources: GPUs.."
    )


def test_elastic_job_takes_what_fits_above_minimum() -> None:
    r = run([Node("n0", gpus=3)], [job("e", n=5, min_available=2)])
    assert [status(r, f"e-{i}") for i in range(5)].count(TaskState.ALLOCATED) == 3
    assert r.tasks["e-3"].text() == (
        "no nodes with enough resources were found: 1 node(s) didn't have enough resources: GPUs."
    )
    assert "Resources were not found for pod default/e-3 due to: no nodes" in r.job_message("e")


def test_binpack_fills_fullest_node_and_spread_the_emptiest() -> None:
    nodes = [Node("a", gpus=4), Node("b", gpus=4)]
    running = Job("r", queue="q", tasks=[Task("r-0", gpu=2, state=TaskState.RUNNING, node="b")])
    r = run(nodes, [running, job("p")])
    assert r.tasks["p-0"].node == "b"
    r = run(nodes, [running, job("p")], config=Config(actions=("allocate",), placement="spread"))
    assert r.tasks["p-0"].node == "a"


def test_fractions_share_one_device() -> None:
    r = run([Node("n0", gpus=2)], [job("a", gpu=0.5), job("b", gpu=0.5, created_s=-1)])
    assert r.tasks["a-0"].gpu_devices == r.tasks["b-0"].gpu_devices
    assert r.queues["q"].allocated["gpu"] == 1.0


def test_fraction_does_not_land_on_a_whole_gpu() -> None:
    running = Job("w", queue="q", tasks=[Task("w-0", gpu=1, state=TaskState.RUNNING, node="n0")])
    r = run([Node("n0", gpus=2)], [running, job("f", gpu=0.3)])
    assert r.tasks["f-0"].gpu_devices == (1,)


def test_gpu_memory_request_is_converted_per_device() -> None:
    node = Node("n0", gpus=1, gpu_memory_mib=1000)
    j = Job("m", queue="q", tasks=[Task("m-0", gpu_memory_mib=250)])
    r = run([node], [j])
    assert status(r, "m-0") == TaskState.ALLOCATED
    assert r.queues["q"].allocated["gpu"] == 0.25


def test_node_selector_and_cordon_and_max_pods() -> None:
    nodes = [
        Node("cordoned", gpus=8, unschedulable=True, labels={"type": "h100"}),
        Node("full", gpus=8, max_pods=0, labels={"type": "h100"}),
        Node("other", gpus=8, labels={"type": "a100"}),
        Node("good", gpus=8, labels={"type": "h100"}),
    ]
    r = run(nodes, [job("s", node_selector={"type": "h100"})])
    assert r.tasks["s-0"].node == "good"
    r = run(nodes[:3], [job("s", node_selector={"type": "h100"})])
    assert r.tasks["s-0"].text() == (
        "no nodes with enough resources were found: "
        "1 node is unschedulable. \n1 node(s) didn't match Pod's node affinity/selector. \n"
        "1 node(s) pod number exceeded."
    )


def test_fit_error_counts_nodes() -> None:
    nodes = [Node("c", gpus=8, unschedulable=True)] + [Node(f"n{i}", gpus=1) for i in range(3)]
    r = run(nodes, [job("big", gpu=2)])
    assert r.tasks["big-0"].text() is not None
    assert (
        r.tasks["big-0"]
        .text()
        .endswith(
            "no nodes with enough resources were found: 1 node is unschedulable. \n"
            "3 node(s) didn't have enough resources: GPUs."
        )
    )


def test_pools_are_isolated_shards() -> None:
    """kai-semantics §1.6: each pool schedules its own nodes, queues and jobs; a queue's quota
    and fair share apply in its own pool only."""
    nodes = [Node("a", gpus=1, pool="p1"), Node("b", gpus=4, pool="p2")]
    queues = [
        Queue("q1", pool="p1", resources={"gpu": QueueResource(1, -1, 1)}),
        Queue("q2", pool="p2", resources={"gpu": QueueResource(1, -1, 1)}),
    ]
    r = run(nodes, [job("x", n=2, min_available=2, q="q1"), job("y", n=2, min_available=2, q="q2")], queues)
    assert status(r, "x-0") == TaskState.PENDING  # 2 GPUs asked in a 1-GPU pool
    assert {r.tasks["y-0"].node, r.tasks["y-1"].node} == {"b"}
    assert r.queues["q2"].fair_share["gpu"] == 2 and r.queues["q1"].fair_share["gpu"] == 1
    assert set(r.pool_queues["p1"]) == {"q1"} and set(r.pool_queues["p2"]) == {"q2"}


def test_child_queue_inherits_its_parents_pool_and_a_top_level_queue_defaults() -> None:
    queues = [
        Queue("dept", pool="p2", resources={"gpu": QueueResource(4, -1, 1)}),
        Queue("team", parent="dept", resources={"gpu": QueueResource(4, -1, 1)}),
        Queue("other"),
    ]
    nodes = [Node("b", gpus=4, pool="p2"), Node("d", gpus=2)]
    r = run(nodes, [job("t", n=3, q="team"), job("o", n=1, q="other")], queues)
    assert {r.tasks[f"t-{i}"].node for i in range(3)} == {"b"}
    assert r.tasks["o-0"].node == "d"
    assert set(r.pool_queues["p2"]) == {"dept", "team"} and set(r.pool_queues["default"]) == {"other"}


def test_a_job_asking_for_another_pool_than_its_queues_waits_with_queue_does_not_exist() -> None:
    nodes = [Node("a", gpus=1, pool="p1"), Node("b", gpus=4, pool="p2")]
    queues = [Queue("q1", pool="p1")]
    r = run(nodes, [job("x", q="q1", node_selector={"kai.scheduler/node-pool": "p2"})], queues)
    assert status(r, "x-0") == TaskState.PENDING
    assert r.job_message("x") == (
        "QueueDoesNotExist: Queue 'q1' does not exist in node-pool 'p2': it belongs to node-pool 'p1'. "
        "Submit the job to a queue of node-pool 'p2', or drop the node-pool selector.."
    )


def test_required_topology_keeps_gang_in_one_domain() -> None:
    nodes = [
        Node("a1", gpus=2, labels={"rack": "a"}),
        Node("b1", gpus=2, labels={"rack": "b"}),
        Node("b2", gpus=2, labels={"rack": "b"}),
    ]
    j = job("t", n=3, min_available=3, topology=TopologyConstraint(required="rack"))
    r = run(nodes, [j])
    assert {r.tasks[f"t-{i}"].node for i in range(3)} <= {"b1", "b2"}
    j = job("t", n=5, min_available=5, topology=TopologyConstraint(required="rack"))
    r = run(nodes, [j])
    assert status(r, "t-0") == TaskState.PENDING
    assert r.job_message("t") == (
        "Unable to schedule podgroup: node-group a can allocate only 2 of 5 required pods. \n"
        "node-group b can allocate only 4 of 5 required pods. \n"
        "topology rack, requirement rack couldn't be satisfied for job <default/t>."
    )


def test_queue_limit_message() -> None:
    running = Job("r", queue="q", tasks=[Task("r-0", gpu=2, state=TaskState.RUNNING, node="n0")])
    r = run([Node("n0", gpus=8)], [running, job("p", gpu=3)], queues=[queue(limit=4)])
    assert status(r, "p-0") == TaskState.PENDING
    assert r.tasks["p-0"].text() == (
        "OverLimit: q quota has reached the allowable limit of GPUs. Limit is 4 GPUs, currently 2 GPUs "
        "allocated and workload requested 3 GPUs."
    )


def test_non_preemptible_job_stays_within_quota() -> None:
    r = run([Node("n0", gpus=8)], [job("np", gpu=2, priority=125)], queues=[queue(quota=1)])
    assert status(r, "np-0") == TaskState.PENDING
    assert r.tasks["np-0"].text() == (
        "NonPreemptibleOverQuota: Non-preemptible workload is over quota. Workload requested 2 GPUs, but q "
        "quota is 1 GPUs, while 0 GPUs are already allocated for non-preemptible pods. Use a preemptible "
        "workload to go over quota.."
    )


def test_parent_limit_blocks_child() -> None:
    queues = [queue("dept", limit=1), queue("team", parent="dept", index=1)]
    r = run([Node("n0", gpus=8)], [job("p", gpu=2, q="team")], queues=queues)
    assert "dept quota has reached the allowable limit" in (r.tasks["p-0"].text() or "")


def test_larger_than_any_node_is_a_pre_predicate_error() -> None:
    r = run([Node("n0", gpus=8)], [job("huge", gpu=16)])
    assert "Max GPU resources available in a single node in the default node-pool is topped at 8" in (
        r.tasks["huge-0"].text() or ""
    )


def test_pipelined_onto_releasing_resources() -> None:
    releasing = Job("old", queue="q", tasks=[Task("old-0", gpu=2, state=TaskState.RELEASING, node="n0")])
    r = run([Node("n0", gpus=2)], [releasing, job("new", gpu=2)])
    assert status(r, "new-0") == TaskState.PIPELINED
    assert status(r, "old-0") == TaskState.RELEASING


def test_gang_partly_on_releasing_is_pipelined_entirely() -> None:
    releasing = Job("old", queue="q", tasks=[Task("old-0", gpu=1, state=TaskState.RELEASING, node="n0")])
    r = run([Node("n0", gpus=2)], [releasing, job("g", n=2, min_available=2)])
    assert {status(r, "g-0"), status(r, "g-1")} == {TaskState.PIPELINED}


def test_queue_order_prefers_starved_queue() -> None:
    queues = [queue("a", quota=1), queue("b", quota=1, index=1)]
    running = Job("r", queue="a", tasks=[Task("r-0", gpu=1, state=TaskState.RUNNING, node="n0")])
    jobs = [running, job("pa", q="a", created_s=100), job("pb", q="b")]
    r = run([Node("n0", gpus=2)], jobs, queues=queues)
    assert status(r, "pb-0") == TaskState.ALLOCATED
    assert status(r, "pa-0") == TaskState.PENDING


def test_unknown_action_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown action"):
        run([Node("n0", gpus=1)], [], config=Config(actions=("allocate", "teleport")))


def test_rounds_turn_allocations_into_running() -> None:
    snap = Snapshot([Node("n0", gpus=1)], [queue()], [job("a"), job("b", created_s=-5)])
    r = run_rounds(snap, Config(actions=("allocate",), rounds=2))
    assert status(r, "a-0") == TaskState.RUNNING
    assert status(r, "b-0") == TaskState.PENDING


def test_events_and_counters() -> None:
    r = run([Node("n0", gpus=1)], [job("a"), job("b", created_s=-5)])
    kinds = {(e.object, e.kind) for e in r.events}
    assert (
        ("a-0", "Scheduled") in kinds
        and ("b-0", "Unschedulable") in kinds
        and ("b", "Unschedulable") in kinds
    )
    assert r.counters["allocated"] == 1 and r.counters["pending"] == 1


def test_a_running_job_stays_with_the_pool_of_its_nodes_when_its_queue_moves() -> None:
    """A pod holds its node whatever its queue's pool says now: it is never taken for pending and
    placed a second time (that would book one GPU twice)."""
    nodes = [Node("a", gpus=1, pool="p1"), Node("b", gpus=1, pool="p2")]
    running = Job("r", queue="q", tasks=[Task("r-0", gpu=1, state=TaskState.RUNNING, node="a")])
    r = run(nodes, [running, job("new", q="q")], [Queue("q", pool="p2")])
    assert status(r, "r-0") == TaskState.RUNNING and r.tasks["r-0"].node == "a"
    assert r.tasks["new-0"].node == "b"
