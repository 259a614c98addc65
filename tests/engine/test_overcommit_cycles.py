"""Several full cycles (every action) over random snapshots never over-commit anything.

Each cycle's result is applied the way the simulator does (``scheduler/simulate/core.py``):
Allocated tasks run where they were placed; a job that lost a running task (Releasing, or
Pipelined elsewhere) stops whole and is pending again. Two things the simulator does not do are
added to reach every action: an evicted job's pods may stay Releasing for one more cycle (so
pipelined tasks meet releasing ones), and a running gang may lose a pod (so stale gangs exist).
After every cycle ``scheduler.overcommit.problems`` must be empty: no GPU device, node CPU /
memory / pod slot or queue limit over-committed across Running, Allocated, Pipelined and
Releasing tasks.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler.gang import meets_minimum
from scheduler.model import ExternalUsage, SubGroup
from scheduler.overcommit import problems
from scheduler.result import CycleResult

CYCLES = 4
PLACED = (TaskState.ALLOCATED, TaskState.PIPELINED)


@dataclasses.dataclass
class World:
    nodes: list[Node]
    queues: list[Queue]
    arrivals: list[tuple[int, Job]]  # (cycle it is submitted in, job)
    keep_releasing: bool
    failures: list[tuple[int, int]]  # (cycle, job index): a running pod of that job fails


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([0, 2, 4, 4, 8]))
        # Pods of other schedulers on the node (issue 16): never handed out, never evicted.
        external = ExternalUsage(
            gpus=draw(st.integers(0, gpus // 2)),
            cpu_millis=draw(st.sampled_from([0, 0, 1000])),
            pods=draw(st.integers(0, 1)),
        )
        nodes.append(Node(
            f"n{i}",
            gpus=gpus,
            gpu_memory_mib=1000,
            cpu_millis=draw(st.sampled_from([4000, 64000])),
            max_pods=draw(st.integers(2, 8)),
            unschedulable=i > 0 and draw(st.integers(0, 9)) == 0,
            external=external,
        ))  # fmt: skip
    queues = [Queue("root", resources={"gpu": QueueResource(-1, draw(st.sampled_from([-1, 8])), 1)})]
    for i in range(draw(st.integers(1, 3))):
        queues.append(
            Queue(
                f"q{i}",
                parent="root",
                created_index=i + 1,
                resources={
                    "gpu": QueueResource(
                        draw(st.sampled_from([0, 1, 2, 4])),
                        draw(st.sampled_from([-1, -1, 3, 6])),
                        draw(st.sampled_from([0, 1, 2])),
                    )
                },
            )
        )
    arrivals = []
    for j in range(draw(st.integers(1, 9))):
        n = draw(st.integers(1, 4))
        gpu = draw(st.sampled_from([0.5, 1, 1, 2, 4]))
        spread_over = draw(st.sampled_from([1, 1, 2])) if gpu < 1 else 1  # gpu-fraction-num-devices
        split = n >= 2 and draw(st.booleans())  # two sub-groups: the first task, the others
        tasks = [
            Task(
                f"j{j}-{t}",
                gpu=gpu,
                gpu_fraction_devices=spread_over,
                cpu_millis=draw(st.sampled_from([0, 1000])),
                subgroup=("lead" if t == 0 else "rest") if split else None,
            )
            for t in range(n)
        ]
        job = Job(
            f"j{j}",
            queue=f"q{draw(st.integers(0, len(queues) - 2))}",
            tasks=tasks,
            min_available=draw(st.integers(1, n)),
            priority=draw(st.sampled_from([40, 50, 100, 125])),
            subgroups=[SubGroup("lead", 1), SubGroup("rest", draw(st.integers(0, n - 1)))] if split else [],
        )
        arrivals.append((draw(st.integers(0, CYCLES - 1)), job))
    failures = draw(
        st.lists(st.tuples(st.integers(1, CYCLES - 1), st.integers(0, len(arrivals) - 1)), max_size=2)
    )
    return World(nodes, queues, arrivals, draw(st.booleans()), failures)


def _apply(snapshot: Snapshot, result: CycleResult, keep_releasing: bool) -> list[Job]:
    jobs = []
    for job in snapshot.jobs:
        lost = any(
            t.state == TaskState.RUNNING
            and result.tasks[t.name].status in (TaskState.RELEASING, TaskState.PIPELINED)
            for t in job.tasks
        )
        tasks = []
        for t in job.tasks:
            out = result.tasks[t.name]
            if lost:
                if keep_releasing and t.state == TaskState.RUNNING:
                    tasks.append(dataclasses.replace(t, state=TaskState.RELEASING))
                else:
                    tasks.append(dataclasses.replace(t, state=TaskState.PENDING, node=None, gpu_devices=()))
            elif out.status == TaskState.ALLOCATED:
                tasks.append(
                    dataclasses.replace(
                        t, state=TaskState.RUNNING, node=out.node, gpu_devices=out.gpu_devices
                    )
                )
            elif t.state == TaskState.RELEASING:  # gone by the next cycle
                tasks.append(dataclasses.replace(t, state=TaskState.PENDING, node=None, gpu_devices=()))
            elif t.state == TaskState.RUNNING:
                tasks.append(dataclasses.replace(t, gpu_devices=out.gpu_devices or t.gpu_devices))
            else:
                tasks.append(t)
        jobs.append(dataclasses.replace(job, tasks=tasks, created_s=job.created_s + 10))
    return jobs


def _fail_one(job: Job) -> Job:
    running = [i for i, t in enumerate(job.tasks) if t.state == TaskState.RUNNING]
    if not running:
        return job
    tasks = list(job.tasks)
    i = running[-1]
    tasks[i] = dataclasses.replace(tasks[i], state=TaskState.PENDING, node=None, gpu_devices=())
    stale = len(running) - 1 < job.gang_min
    return dataclasses.replace(job, tasks=tasks, stale_s=120.0 if stale else None)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_full_cycles_never_over_commit(world: World) -> None:
    config = Config(staleness_grace_period_s=60.0)
    jobs: list[Job] = []
    for cycle in range(CYCLES):
        jobs += [job for at, job in world.arrivals if at == cycle]
        failing = {world.arrivals[i][1].name for at, i in world.failures if at == cycle}
        jobs = [_fail_one(j) if j.name in failing else j for j in jobs]
        snap = Snapshot(world.nodes, world.queues, jobs)
        result = run_cycle(snap, config)
        found = problems(snap, result)
        assert not found, f"cycle {cycle}: {found}"
        for job in jobs:  # a job that starts, starts whole: its minimum and every sub-group's
            if any(t.state == TaskState.RUNNING for t in job.tasks):
                continue
            placed = [t for t in job.tasks if result.tasks[t.name].status in PLACED]
            assert not placed or meets_minimum(job, placed), f"cycle {cycle}: {job.name} split"
        jobs = _apply(snap, result, world.keep_releasing)


def test_preempting_a_gang_evicts_it_whole_instead_of_double_booking() -> None:
    """Issue 17's example: the 1-GPU job of priority 100 preempts the whole 4-task gang."""
    gang = Job(
        "gang",
        "q",
        priority=50,
        min_available=4,
        tasks=[Task(f"g-{i}", gpu=1, state=TaskState.RUNNING, node="n0") for i in range(4)],
    )
    hi = Job("hi", "q", priority=100, tasks=[Task("hi-0", gpu=1)])
    snap = Snapshot(
        [Node("n0", gpus=4)],
        [Queue("q", resources={"gpu": QueueResource(4, -1, 1)})],
        [gang, hi],
    )
    result = run_cycle(snap)
    assert problems(snap, result) == []
    assert result.tasks["hi-0"].status == TaskState.PIPELINED
    assert {result.tasks[f"g-{i}"].status for i in range(4)} == {TaskState.RELEASING}
    assert result.queues["q"].allocated["gpu"] == 1


def test_whole_gpu_victim_unevicted_elsewhere_keeps_its_own_devices() -> None:
    """--hypothesis-seed=53's second cycle, minimised. j0 preempts j1 (min 2 of 3): j1-0 is
    re-placed onto n1, on j1-1's GPUs; j1-1 is un-evicted there all the same (KAI counts whole
    GPUs), so its pod keeps GPUs 0-1 and j1-0 waits for j1-2's, which stays Releasing. Putting
    j1-1 on j1-2's GPUs double-booked them
    (tests/scenarios/kai-diff/whole-gpu-victim-keeps-its-own-devices.yaml has KAI's result)."""
    running = {"j1-0": ("n0", (0, 1)), "j1-1": ("n1", (0, 1)), "j1-2": ("n1", (2, 3))}
    j1 = Job(
        "j1",
        "q0",
        priority=40,
        min_available=2,
        tasks=[
            Task(name, gpu=2, state=TaskState.RUNNING, node=node, gpu_devices=devices)
            for name, (node, devices) in running.items()
        ],
    )
    j0 = Job("j0", "q0", priority=50, tasks=[Task("j0-0", gpu=0.5)])
    snap = Snapshot(
        [Node(f"n{i}", gpus=g, gpu_memory_mib=1000, max_pods=2) for i, g in enumerate((2, 4))],
        [
            Queue("root", resources={"gpu": QueueResource(-1, -1, 1)}),
            Queue("q0", parent="root", created_index=1, resources={"gpu": QueueResource(0, -1, 0)}),
        ],
        [j1, j0],
    )
    result = run_cycle(snap, Config(staleness_grace_period_s=60.0))
    assert problems(snap, result) == []
    out = {name: (t.status, t.node, t.gpu_devices) for name, t in result.tasks.items()}
    assert out["j1-1"] == (TaskState.RUNNING, "n1", (0, 1))
    assert out["j1-2"] == (TaskState.RELEASING, "n1", (2, 3))
    assert out["j1-0"] == (TaskState.PIPELINED, "n1", (2, 3))
    assert out["j0-0"][:2] == (TaskState.PIPELINED, "n0")


def test_consolidation_never_plans_more_pods_than_a_node_takes() -> None:
    """n1 takes two pods, both releasing (a moved fraction and its GPU's reservation pod). A task
    moved there earlier in the cycle, evicted and then put back to its move
    (``simulation._back_to_its_move``) once took no slot check, after another task took the last
    one: three pods planned on n1. Found by a random draw of the property test above (hypothesis
    seed 12; it failed on ca8ee7f too)."""

    def running(name: str, node: str, devices: tuple[int, ...], gpu: float = 1) -> Task:
        return Task(name, gpu=gpu, state=TaskState.RUNNING, node=node, gpu_devices=devices)

    def job(name: str, tasks: list[Task], created_s: float) -> Job:
        return Job(name, "q0", priority=40, min_available=1, created_s=created_s, tasks=tasks)

    lead = dataclasses.replace(running("j0-0", "n2", (1,)), subgroup="lead")
    rest = [dataclasses.replace(running(f"j0-{i}", "n2", (i + 1,)), subgroup="rest") for i in (1, 2)]
    snap = Snapshot(
        [
            Node("n0", gpus=2, gpu_memory_mib=1000, cpu_millis=4000, max_pods=2),
            Node("n1", gpus=4, gpu_memory_mib=1000, cpu_millis=4000, max_pods=2),
            Node("n2", gpus=4, gpu_memory_mib=1000, cpu_millis=4000, max_pods=6),
        ],
        [
            Queue("root", resources={"gpu": QueueResource(-1, -1, 1)}),
            Queue("q0", parent="root", resources={"gpu": QueueResource(0, -1, 0)}, created_index=1),
        ],
        [
            job("j2", [running("j2-0", "n0", (0,))], 20),
            job("j6", [running("j6-0", "n1", (0,), gpu=0.5)], 20),
            job("j7", [running("j7-0", "n0", (1,))], 20),
            job("j8", [running("j8-0", "n2", (0,), gpu=0.5)], 20),
            dataclasses.replace(
                job("j0", [lead, *rest], 10),
                subgroups=[SubGroup("lead", min_available=1), SubGroup("rest", min_available=0)],
            ),
            job("j1", [Task(f"j1-{i}", gpu=1) for i in range(2)], 0),
            job("j4", [Task("j4-0", gpu=1)], 0),
            job("j5", [Task(f"j5-{i}", gpu=1) for i in range(3)], 0),
        ],
    )
    result = run_cycle(snap, Config(staleness_grace_period_s=60.0))
    assert not problems(snap, result)
