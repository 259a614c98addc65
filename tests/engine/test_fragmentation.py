"""The fragmentation placement strategy (scheduler/fragmentation.py): the FGD score worked by
hand, its agreement with binpack where fragmentation cannot tell nodes apart, its fast path
against the reference scan, and the option's declaration (config and scenario keys)."""

from __future__ import annotations

import math
import random

import pytest

from scheduler import (
    Config,
    Job,
    Node,
    Queue,
    QueueResource,
    Snapshot,
    Taint,
    Task,
    TaskState,
    Toleration,
    run_cycle,
)
from scheduler.cycle import open_session
from scheduler.fragmentation import Request, fragmentation, typical_requests
from scheduler.placement import best_fit, best_fit_reference
from scheduler.scenario.loader import load as load_scenario
from scheduler.scenario.schema import ScenarioError

UNLIMITED = {r: QueueResource(quota=-1.0, limit=-1.0) for r in ("gpu", "cpu", "memory")}
REST = "nodes: [{name: n, gpus: 1}]\nqueues: [{name: q}]\n"
ONE_GPU_4_CORES = ((1.0, 4000.0, 0.0, 1.0),)


def _snapshot(nodes: list[Node], jobs: list[Job]) -> Snapshot:
    return Snapshot(nodes=nodes, queues=[Queue("q", resources=UNLIMITED)], jobs=jobs)


def _job(name: str, gpu: float, cpu: float = 0.0, node: str | None = None, device: int | None = None) -> Job:
    if node is None:
        task = Task(f"{name}-0", job=name, gpu=gpu, cpu_millis=cpu)
    else:
        devices = (device,) if device is not None else tuple(range(int(gpu)))
        task = Task(
            f"{name}-0",
            job=name,
            gpu=gpu,
            cpu_millis=cpu,
            state=TaskState.RUNNING,
            node=node,
            gpu_devices=devices,
        )
    return Job(name, queue="q", tasks=[task], last_start_s=100.0 if node else None)


def test_fragmentation_of_one_node_by_hand() -> None:
    # Devices free: 1.0, 0.5, 0.2; 6 cores free. Requests: 1 GPU (share 0.5), 0.5 GPU with 8 cores
    # (0.3, lacks CPU: all 1.7 free is lost), CPU only (0.2: all of it, as the simulator counts).
    requests = [Request(1.0, 0.0, 0.0, 0.5), Request(0.5, 8000.0, 0.0, 0.3), Request(0.0, 1000.0, 0.0, 0.2)]
    free = ((0.2, 0.5, 1.0), 6000.0, 1e9)
    # 1 GPU: the 0.5 and 0.2 devices are too small -> 0.7; 0.5 GPU: lacks CPU -> 1.7; CPU: 1.7
    assert fragmentation(free, requests) == pytest.approx(0.5 * 0.7 + 0.3 * 1.7 + 0.2 * 1.7)
    # memory is a lack like CPU
    assert fragmentation(((1.0,), 1e9, 10.0), [Request(1.0, 0.0, 64.0, 1.0)]) == pytest.approx(1.0)
    assert fragmentation(((0.0, 0.0), 1e9, 1e9), requests) == 0.0


def test_typical_requests_keep_the_most_frequent_to_95_percent() -> None:
    shapes = [(1.0, 4000.0, 0.0)] * 60 + [(0.5, 2000.0, 0.0)] * 36 + [(8.0, 88000.0, 0.0)] * 4
    got = typical_requests(shapes)
    # 60 + 36 = 96 >= 95: the rare 8-GPU shape is left out and the shares renormalised
    assert [(r.gpu, r.share) for r in got] == [(1.0, pytest.approx(60 / 96)), (0.5, pytest.approx(36 / 96))]
    assert len(typical_requests(shapes, 1.0)) == 3


def _place(nodes: list[Node], jobs: list[Job], cfg: Config) -> dict[str, tuple[str | None, tuple[int, ...]]]:
    result = run_cycle(_snapshot(nodes, jobs), cfg)
    return {
        name: (o.node, o.gpu_devices) for name, o in result.tasks.items() if o.status == TaskState.ALLOCATED
    }


def test_picks_the_node_where_no_gpu_is_stranded_behind_cpu() -> None:
    # small: 2 free GPUs, 6 free cores; big: 4 free GPUs, 64 cores. A 1-GPU 4-core pod on small
    # leaves 1 GPU with 2 cores, useless to the workload (1 GPU + 4 cores): fragmentation 0 -> 1,
    # level floor(100 sigmoid(-1)) = 26 against big's 50. Binpack takes small (fewer free GPUs).
    nodes = [Node("big", gpus=4, cpu_millis=64000), Node("small", gpus=4, cpu_millis=16000)]
    jobs = [_job("run", 2, 10000, node="small"), _job("pod", 1, 4000)]
    frag = Config(actions=("allocate",), placement="fragmentation", fragmentation_requests=ONE_GPU_4_CORES)
    assert _place(nodes, jobs, frag)["pod-0"][0] == "big"
    assert _place(nodes, jobs, Config(actions=("allocate",)))["pod-0"][0] == "small"
    assert math.floor(100 / (1 + math.e)) == 26  # the level named above


def test_a_fraction_goes_to_the_device_that_leaves_usable_room() -> None:
    # Device 1 holds 0.3; a 0.5 pod there leaves 0.2 that no half-GPU request fits. On free
    # device 0 it leaves 0.7 and 0.5, both usable. Binpack fills the shared device 1.
    nodes = [Node("n", gpus=2, cpu_millis=64000)]
    jobs = [_job("run", 0.3, node="n", device=1), _job("half", 0.5)]
    cfg = Config(
        actions=("allocate",), placement="fragmentation", fragmentation_requests=((0.5, 0.0, 0.0, 1.0),)
    )
    assert _place(nodes, jobs, cfg)["half-0"] == ("n", (0,))
    assert _place(nodes, jobs, Config(actions=("allocate",)))["half-0"] == ("n", (1,))


def test_within_a_level_a_whole_gpu_pod_counts_free_cpu_at_the_pools_rate() -> None:
    # roomy: 1 GPU and 40 cores free; cramped: 2 GPUs and 8 cores. The workload (1 GPU, no CPU)
    # never fragments a whole device, so both nodes share one level and the fuller one wins. The
    # pool has 56 cores for 4 GPUs (14 per GPU): cramped holds 2 + 8/14 = 2.6 GPUs of room, roomy
    # 1 + 40/14 = 3.9, so a whole-GPU pod fills cramped, whose GPUs would soon lack CPU anyway,
    # and keeps roomy's CPU for the pods that need it. A fraction or a CPU-only pod is not sized by
    # CPU (it shares a device / strands GPUs): the node with fewer free GPUs, roomy, as before.
    nodes = [Node("roomy", gpus=2, cpu_millis=48000), Node("cramped", gpus=2, cpu_millis=8000)]
    running = [_job("run", 1, 8000, node="roomy")]
    frag = Config(
        actions=("allocate",), placement="fragmentation", fragmentation_requests=((1.0, 0.0, 0.0, 1.0),)
    )
    binpack = Config(actions=("allocate",))
    assert _place(nodes, [*running, _job("pod", 1, 2000)], frag)["pod-0"][0] == "cramped"
    assert _place(nodes, [*running, _job("pod", 1, 2000)], binpack)["pod-0"][0] == "roomy"
    assert _place(nodes, [*running, _job("half", 0.5, 2000)], frag)["half-0"][0] == "roomy"
    assert _place(nodes, [*running, _job("cpu", 0, 2000)], frag)["cpu-0"][0] == "roomy"


@pytest.mark.parametrize("seed", range(6))
def test_same_answers_as_binpack_where_fragmentation_is_equal(seed: int) -> None:
    # Whole-GPU pods and a workload of 1-GPU requests with no CPU: a whole free device never
    # fragments, so every node has the same level and the fullest node wins, as under binpack.
    rng = random.Random(seed)
    nodes = [Node(f"n{i}", gpus=rng.choice((2, 4, 8)), cpu_millis=64000) for i in range(8)]
    jobs = []
    for i, n in enumerate(nodes):
        used = rng.randint(0, n.gpus - 1)
        if used:
            jobs.append(_job(f"run{i}", used, node=n.name))
    jobs += [_job(f"p{k:02d}", rng.choice((1, 1, 2, 4))) for k in range(12)]
    frag = Config(
        actions=("allocate",), placement="fragmentation", fragmentation_requests=((1.0, 0.0, 0.0, 1.0),)
    )
    binpack = _place(nodes, jobs, Config(actions=("allocate",)))
    assert _place(nodes, jobs, frag) == binpack
    assert binpack  # the case places pods


@pytest.mark.parametrize("seed", range(8))
def test_fast_path_agrees_with_the_reference_scan(seed: int) -> None:
    # The per-shape score cache (fragmentation.best) against score_nodes over every node, while
    # the cluster fills with whole, fractional and CPU-only pods.
    rng = random.Random(seed)
    nodes = [
        Node(f"n{i}", gpus=rng.choice((0, 2, 4, 8)), cpu_millis=rng.choice((16000, 64000))) for i in range(10)
    ]
    shapes = [(1.0, 4000.0), (0.5, 2000.0), (0.25, 1000.0), (2.0, 8000.0), (0.0, 4000.0)]
    jobs = [_job(f"p{k:03d}", *rng.choice(shapes)) for k in range(60)]
    cfg = Config(actions=("allocate",), placement="fragmentation")  # requests from the session's tasks
    session = open_session(_snapshot(nodes, jobs), cfg, "default")
    stmt = session.statement()
    checked = 0
    for job in jobs:
        task = job.tasks[0]
        fast = best_fit(session, task, job, session.node_list())
        ref = best_fit_reference(session, task, job, session.node_list())
        assert (fast is None) == (ref is None)
        if fast is None or ref is None:
            continue
        assert (fast[0].name, fast[1].devices, fast[1].now) == (ref[0].name, ref[1].devices, ref[1].now)
        stmt.place(task, fast[0].name, fast[1].devices, pipelined=not fast[1].now)
        checked += 1
    assert checked > 20


def test_scenario_keys(tmp_path: object) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    good = base / "good.yaml"
    good.write_text(
        "name: x\nconfig:\n  gpu_placement: fragmentation\n  fragmentation_requests:\n"
        "    - {gpu: 1, cpu_millis: 4000, memory_mib: 1024, weight: 3}\n    - {gpu: 0.5}\n"
        "nodes: [{name: n, gpus: 1}]\nqueues: [{name: q}]\n"
    )
    cfg = load_scenario(good).config
    assert (cfg.strategy(True), cfg.strategy(False)) == ("fragmentation", "binpack")
    assert cfg.fragmentation_requests == ((1.0, 4000.0, 1024.0, 3.0), (0.5, 0.0, 0.0, 1.0))
    bad = base / "bad.yaml"
    bad.write_text("name: x\nconfig: {placement: tetris}\nnodes: [{name: n, gpus: 1}]\nqueues: [{name: q}]\n")
    with pytest.raises(
        ScenarioError, match="config.placement must be binpack, spread or fragmentation, not 'tetris'"
    ):
        load_scenario(bad)
    bad.write_text("name: x\nconfig: {fragmentation_requests: [{gpu: -1}]}\n" + REST)
    with pytest.raises(
        ScenarioError, match=r"fragmentation_requests\[0\]: gpu, cpu_millis, memory_mib and weight"
    ):
        load_scenario(bad)
    bad.write_text("name: x\nconfig: {fragmentation_requests: [{gpu: 1, weight: 0}]}\n" + REST)
    with pytest.raises(ScenarioError, match="at least one request with a weight above 0"):
        load_scenario(bad)


def test_a_job_with_its_own_rules_does_not_reuse_another_jobs_scores() -> None:
    # Same task shape, but only the second job tolerates the taint of the fuller node.
    nodes = [
        Node("plain", gpus=4, cpu_millis=64000),
        Node("tainted", gpus=4, cpu_millis=64000, taints=[Taint("team", "a", "NoSchedule")]),
    ]
    first = _job("first", 1)
    first.created_s = 50.0
    second = _job("second", 1)
    second.created_s = 10.0
    second.tolerations = [Toleration("team", "Equal", "a", "NoSchedule")]
    jobs = [_job("run", 3, node="tainted"), first, second]
    cfg = Config(
        actions=("allocate",), placement="fragmentation", fragmentation_requests=((1.0, 0.0, 0.0, 1.0),)
    )
    placed = _place(nodes, jobs, cfg)
    assert (placed["first-0"][0], placed["second-0"][0]) == ("plain", "tainted")
