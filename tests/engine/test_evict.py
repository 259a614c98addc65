"""Eviction actions: reclaim, preempt, consolidation, stale gangs, min-runtime, scale shapes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler.actions.common.queues import diverging
from scheduler.actions.reclaim.rules import reclaim_min_runtime
from scheduler.cycle import open_session
from scheduler.ordering import allocatable_share
from scheduler.overcommit import problems
from scheduler.reasons import render
from tests.engine.scale_cases import reclaim_big_gang

R = TaskState.RUNNING


def q(name: str, quota: float = 0, parent: str | None = "root", **kw: object) -> Queue:
    return Queue(name, parent=parent, resources={"gpu": QueueResource(quota, -1, 1)}, **kw)  # type: ignore[arg-type]


def running(name: str, queue: str, node: str, gpu: float = 1, **kw: object) -> Job:
    return Job(name, queue, tasks=[Task(f"{name}-0", gpu=gpu, state=R, node=node)], **kw)  # type: ignore[arg-type]


def pending(name: str, queue: str, gpu: float = 1, n: int = 1, **kw: object) -> Job:
    return Job(name, queue, tasks=[Task(f"{name}-{i}", gpu=gpu) for i in range(n)], **kw)  # type: ignore[arg-type]


ROOT = Queue("root", resources={"gpu": QueueResource(-1, -1, 1)})


def test_reclaim_takes_from_queue_over_fair_share_with_message() -> None:
    snap = Snapshot(
        [Node("n0", gpus=2)],
        [ROOT, q("a", 1), q("b", 1)],
        [running("a1", "a", "n0", created_s=10), running("a2", "a", "n0", created_s=5), pending("b1", "b")],
    )
    r = run_cycle(snap, Config(actions=("reclaim",)))
    assert r.tasks["a2-0"].status == TaskState.RELEASING  # newest first
    assert r.tasks["a1-0"].status == R
    assert r.tasks["b1-0"].status == TaskState.PIPELINED
    (ev,) = r.evictions
    assert (ev.task, ev.action, ev.evictor_job, ev.evictor_queue) == ("a2-0", "reclaim", "b1", "b")
    assert render(ev.message).startswith(
        "Pod default/a2-0 was preempted by workload default/b1.\na uses GPU: "
    )
    assert any(e.kind == "Evict" for e in r.events)


def test_reclaim_never_takes_from_queue_within_quota() -> None:
    snap = Snapshot(
        [Node("n0", gpus=2)],
        [ROOT, q("a", 2), q("b", 0)],
        [running("a1", "a", "n0"), running("a2", "a", "n0"), pending("b1", "b")],
    )
    r = run_cycle(snap, Config(actions=("reclaim",)))
    assert not r.evictions and r.tasks["b1-0"].status == TaskState.PENDING


def test_non_preemptible_and_min_runtime_are_never_victims() -> None:
    queues = [ROOT, q("a", 0, reclaim_min_runtime_s=600), q("b", 2)]
    jobs = [
        running("np", "a", "n0", priority=125),  # non-preemptible by priority
        running("young", "a", "n0", last_start_s=60),  # inside its reclaim min-runtime
        pending("b1", "b"),
    ]
    r = run_cycle(Snapshot([Node("n0", gpus=2)], queues, jobs), Config(actions=("reclaim",)))
    assert not r.evictions


def test_min_runtime_lca_rule() -> None:
    queues = [
        Queue("A"),
        Queue("B", parent="A", reclaim_min_runtime_s=600),
        Queue("C", parent="B"),
        Queue("leaf1", parent="C", reclaim_min_runtime_s=0),
        Queue("leaf2", parent="C", reclaim_min_runtime_s=180),
        Queue("D", parent="B", reclaim_min_runtime_s=60),
        Queue("leaf3", parent="D"),
    ]
    s = open_session(Snapshot([Node("n")], queues, []), Config(), "default")
    assert reclaim_min_runtime(s, "leaf1", "leaf3") == 60
    assert reclaim_min_runtime(s, "leaf1", "leaf2") == 180
    assert reclaim_min_runtime(s, "leaf3", "leaf1") == 600


def test_preempt_only_strictly_lower_priority_same_queue() -> None:
    nodes = [Node("n0", gpus=1)]
    same = Snapshot(
        nodes, [ROOT, q("a", 1)], [running("low", "a", "n0", priority=50), pending("hi", "a", priority=100)]
    )
    r = run_cycle(same, Config(actions=("preempt",)))
    assert r.tasks["low-0"].status == TaskState.RELEASING and r.tasks["hi-0"].status == TaskState.PIPELINED
    assert (
        render(r.evictions[0].message)
        == "Pod default/low-0 was preempted by higher priority workload default/hi"
    )
    equal = Snapshot(
        nodes, [ROOT, q("a", 1)], [running("low", "a", "n0", priority=50), pending("hi", "a", priority=50)]
    )
    assert not run_cycle(equal, Config(actions=("preempt",))).evictions
    other = Snapshot(
        nodes,
        [ROOT, q("a", 1), q("b", 1)],
        [running("low", "a", "n0", priority=50), pending("hi", "b", priority=100)],
    )
    assert not run_cycle(other, Config(actions=("preempt",))).evictions


def test_preempt_respects_preempt_min_runtime() -> None:
    snap = Snapshot(
        [Node("n0", gpus=1)],
        [ROOT, q("a", 1, preempt_min_runtime_s=300)],
        [running("low", "a", "n0", last_start_s=10), pending("hi", "a", priority=100)],
    )
    assert not run_cycle(snap, Config(actions=("preempt",))).evictions


def test_consolidation_moves_all_victims() -> None:
    snap = Snapshot(
        [Node("n0", gpus=2), Node("n1", gpus=2)],
        [ROOT, q("a", 4)],
        [running("x", "a", "n0"), running("y", "a", "n1"), pending("p", "a", gpu=2)],
    )
    r = run_cycle(snap, Config(actions=("consolidation",)))
    assert r.tasks["p-0"].status == TaskState.PIPELINED
    moved = [e for e in r.evictions if e.moved_to]
    assert len(moved) == 1 and not [e for e in r.evictions if not e.moved_to]
    assert r.tasks[moved[0].task].status == TaskState.PIPELINED
    assert "bin packing" in render(moved[0].message)


def test_stale_gang_grace_period() -> None:
    def snap(stale_s: float | None) -> Snapshot:
        job = Job(
            "g",
            "a",
            min_available=2,
            stale_s=stale_s,
            tasks=[Task("g-0", gpu=1, state=R, node="n0"), Task("g-1", gpu=1)],
        )
        return Snapshot([Node("n0", gpus=1)], [ROOT, q("a", 1)], [job])

    cfg = Config(actions=("stalegangeviction",))
    assert not run_cycle(snap(None), cfg).evictions
    assert not run_cycle(snap(30), cfg).evictions
    r = run_cycle(snap(61), cfg)
    assert r.tasks["g-0"].status == TaskState.RELEASING
    assert render(r.evictions[0].message) == (
        "Workload doesn't meet the minimum required number of pods (2), evicting remaining pod: default/g-0"
    )


def test_pending_job_message_explains_eviction_actions_and_keeps_fit_error() -> None:
    snap = Snapshot(
        [Node("n0", gpus=2)],
        [ROOT, q("a", 2), q("b", 0)],
        [running("a1", "a", "n0"), running("a2", "a", "n0"), pending("b1", "b")],
    )
    r = run_cycle(snap, Config())
    msg = r.job_message("b1")
    # KAI's message is allocate's fit error alone; why reclaim could not help is the engine's note
    assert msg.startswith("PodSchedulingErrors: Resources were not found for pod default/b1-0")
    assert "no nodes with enough resources were found" in msg
    assert "cannot be reclaimed" not in msg
    assert any("Resources cannot be reclaimed from other queues" in render(n) for n in r.job_notes["b1"])
    # The pod's own text is its fit error, as KAI's pod event says it (the job's goes to the PodGroup).
    assert r.tasks["b1-0"].text() == (
        "no nodes with enough resources were found: 1 node(s) didn't have enough resources: GPUs."
    )


def test_reclaimer_over_fair_share_note() -> None:
    snap = Snapshot(
        [Node("n0", gpus=2)],
        [ROOT, q("a", 2), q("b", 0)],
        [running("a1", "a", "n0"), running("a2", "a", "n0"), pending("b1", "b", gpu=2)],
    )
    r = run_cycle(snap, Config(actions=("reclaim",)))
    (reason,) = r.job_notes["b1"]
    note = render(reason)
    assert note.startswith("ReclaimNotPossible: Resources cannot be reclaimed")
    assert "above its fair share" in note
    assert "b1" not in r.job_messages  # reclaim alone: no fit error of KAI's to report


def test_preemption_delay_blocks_evictions_with_message() -> None:
    def snap(created_s: float, last_eviction_s: float | None = None) -> Snapshot:
        return Snapshot(
            [Node("n0", gpus=1)],
            [ROOT, q("a", 1)],
            [
                running("low", "a", "n0", created_s=1000),
                pending(
                    "hi",
                    "a",
                    priority=100,
                    created_s=created_s,
                    preemption_delay_s=300,
                    last_eviction_s=last_eviction_s,
                ),
            ],
        )

    cfg = Config(actions=("preempt",))
    r = run_cycle(snap(60), cfg)
    assert not r.evictions
    assert r.job_message("hi") == (
        "PreemptionDelayNotElapsed: Workload is within its preemption delay window (5m0s) and may not "
        "trigger evictions before 2026-01-01T00:04:00Z."
    )
    assert run_cycle(snap(600), cfg).evictions
    assert not run_cycle(snap(600, last_eviction_s=100), cfg).evictions


def test_case_a_minimal_victims() -> None:
    n = 100
    r = run_cycle(reclaim_big_gang(n), Config())
    assert r.counters["evicted"] == 4 * n
    assert sum(1 for t in r.tasks.values() if t.job == "gang" and t.status == TaskState.PIPELINED) == n // 2


def test_case_b_cannot_be_placed() -> None:
    r = run_cycle(reclaim_big_gang(100, reclaimable=79, gang_tasks=10), Config())
    assert not r.evictions
    assert all(t.status == TaskState.PENDING for t in r.tasks.values() if t.job == "gang")


@st.composite
def contested(draw: st.DrawFn) -> Snapshot:
    nodes = [Node(f"n{i}", gpus=4) for i in range(draw(st.integers(1, 3)))]
    queues = [ROOT] + [
        q(f"q{i}", draw(st.sampled_from([0, 1, 2, 4])), created_index=i + 1, preempt_min_runtime_s=120)
        for i in range(3)
    ]
    jobs: list[Job] = []
    free = {n.name: 4 for n in nodes}
    for i in range(draw(st.integers(0, 10))):
        node = draw(st.sampled_from(nodes)).name
        g = draw(st.sampled_from([1, 2]))
        if free[node] < g:
            continue
        free[node] -= g
        jobs.append(
            running(
                f"r{i}",
                f"q{draw(st.integers(0, 2))}",
                node,
                gpu=g,
                priority=draw(st.sampled_from([50, 75, 125])),
                last_start_s=draw(st.sampled_from([None, 30.0, 3600.0])),
                created_s=float(i),
            )
        )
    for i in range(draw(st.integers(1, 4))):
        jobs.append(
            pending(
                f"p{i}",
                f"q{draw(st.integers(0, 2))}",
                gpu=draw(st.sampled_from([1, 2, 4])),
                n=draw(st.integers(1, 2)),
                priority=draw(st.sampled_from([50, 100, 125])),
            )
        )
    return Snapshot(nodes, queues, jobs)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested())
def test_eviction_properties(snap: Snapshot) -> None:
    before = open_session(snap, Config(), "default")
    out = run_cycle(snap, Config(actions=("reclaim", "preempt", "consolidation")))
    jobs = {j.name: j for j in snap.jobs}
    # Per queue (whole subtree): GPUs placed by this cycle (pending before, now Allocated or
    # Pipelined) and GPUs it lost to evictions. During the cycle a queue's allocation never exceeds
    # before + placed, and never drops below before - lost.
    placed: dict[str, float] = {}
    lost: dict[str, float] = {}
    for job in snap.jobs:
        for t in job.tasks:
            st_ = out.tasks[t.name].status
            if t.state == TaskState.PENDING and st_ in (TaskState.ALLOCATED, TaskState.PIPELINED):
                for qs in before.ancestors(job.queue):
                    placed[qs.name] = placed.get(qs.name, 0.0) + t.gpu
    for ev in out.evictions:
        if ev.moved_to is None:
            for qs in before.ancestors(ev.queue):
                lost[qs.name] = lost.get(qs.name, 0.0) + jobs[ev.job].tasks[0].gpu
    for ev in out.evictions:
        job = jobs[ev.job]
        assert job.is_preemptible, ev
        if ev.action == "preempt":
            assert job.last_start_s is None or job.last_start_s >= 120
        if ev.action == "reclaim" and ev.moved_to is None:
            assert ev.evictor_queue is not None and ev.evictor_job is not None
            # Judged at the diverging level V* (§3.7), on the allocation before the cycle's
            # evictions with the cycle's own placements counted (only GPUs vary here).
            q_star, v_star = diverging(before, ev.evictor_queue, ev.queue)
            v_alloc = v_star.allocated["gpu"] + placed.get(v_star.name, 0.0)
            # A queue at or below its deserved quota never loses resources through reclaim,
            assert v_alloc > v_star.quota("gpu") + 1e-9, ev
            # and one at or below its fair share (allocatable share, max(quota, fair share)) loses
            # only to a reclaimer whose Q* stays within its own deserved quota with the job
            # (GuaranteeDeservedQuota): deserved quota beats over-quota fair share.
            if v_alloc <= allocatable_share(v_star, "gpu") + 1e-9:
                evictor = jobs[ev.evictor_job]
                j = sum(t.gpu for t in evictor.tasks if out.tasks[t.name].status == TaskState.PIPELINED)
                q_alloc = q_star.allocated["gpu"] - lost.get(q_star.name, 0.0)
                assert q_alloc + j <= q_star.quota("gpu") + 1e-9, ev
        if ev.moved_to is None:
            # matched by a pipelined placement of the job that caused it (unless a later action
            # of the cycle took that placement back as a victim in turn)
            assert (
                ev.evictor_job is None
                or any(
                    t.job == ev.evictor_job and t.status == TaskState.PIPELINED for t in out.tasks.values()
                )
                or any(e.job == ev.evictor_job for e in out.evictions)
            )


def test_a_running_fraction_moved_on_its_node_then_evicted_holds_its_own_gpu() -> None:
    """Reclaim moves j0-0 to another GPU group of its own node (n1), then preempt evicts it there
    (found by ``test_overcommit_cycles`` with hypothesis seed 103). KAI reports it Releasing on
    n1, where its own pod still runs on the GPU it started on: the outcome keeps that GPU, so
    the cycle's picture of n1 holds every share it holds (``overcommit.problems``)."""
    frac = [Task(f"j0-{i}", gpu=0.5, state=R, node="n1", gpu_devices=(0,)) for i in range(2)]
    snap = Snapshot(
        [
            Node("n0", gpus=0, gpu_memory_mib=1000, cpu_millis=4000, max_pods=2),
            Node("n1", gpus=2, gpu_memory_mib=1000, cpu_millis=4000, max_pods=4),
            Node("n2", gpus=0, gpu_memory_mib=1000, cpu_millis=4000, max_pods=2, unschedulable=True),
        ],
        [ROOT, q("q0", created_index=1), q("q1", created_index=2)],
        [
            Job("j0", "q0", priority=40, created_s=10, min_available=1, tasks=frac),
            Job(
                "j1",
                "q1",
                priority=40,
                created_s=10,
                min_available=3,
                tasks=[Task(f"j1-{i}", gpu=1) for i in range(3)],
            ),
            Job(
                "j2",
                "q0",
                priority=40,
                created_s=10,
                min_available=1,
                tasks=[Task("j2-0", gpu=1, state=R, node="n1", gpu_devices=(1,))],
            ),
            pending("j3", "q1", gpu=0.5, priority=40, min_available=1),
            pending("j4", "q0", gpu=0.5, priority=50, min_available=1),
        ],
    )
    result = run_cycle(snap, Config(staleness_grace_period_s=60.0))
    moved = [e for e in result.evictions if e.task == "j0-0"]
    assert [e.action for e in moved] == ["reclaim", "preempt"] and moved[0].moved_to == "n1"
    outcome = result.tasks["j0-0"]
    assert (outcome.status, outcome.node, outcome.gpu_devices) == (TaskState.RELEASING, "n1", (0,))
    assert not problems(snap, result)
