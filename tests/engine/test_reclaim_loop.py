"""No reclaim ping-pong across cycles (kai-semantics.md §3.7, §3.9, §4.1).

Rule: a reclaim never takes resources that the next allocate would give straight back. The
simulation re-places a victim ahead of the reclaimer when allocate would serve the victim's queue
first (queues keyed after the virtual evictions, each represented by its best pending job), so the
scenario fails. Observable over rounds (state moved on with ``advance``, ``now`` fixed): a
reclaimer job never takes from the same victim job in two consecutive rounds - that only happens
when allocate handed the victim its room back in between and the reclaimer never started.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, advance, run_cycle

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt")
ROUNDS = 4


def _gpu_queue(name: str, quota: float, weight: float, index: int) -> Queue:
    return Queue(
        name, parent="root", created_index=index, resources={"gpu": QueueResource(quota, -1, weight)}
    )


def _job(name: str, queue: str, gpu: float, created_s: float, node: str | None = None) -> Job:
    state = TaskState.RUNNING if node else TaskState.PENDING
    return Job(
        name,
        queue=queue,
        tasks=[Task(f"{name}-0", gpu=gpu, state=state, node=node)],
        min_available=1,
        created_s=created_s,
        last_start_s=600.0 if node else None,
    )


def reclaim_pairs(snap: Snapshot, rounds: int = ROUNDS) -> list[set[tuple[str, str]]]:
    """Per round, the (reclaimer job, victim job) pairs of its reclaim evictions."""
    config = Config(actions=ACTIONS)
    out = []
    for _ in range(rounds):
        result = run_cycle(snap, config)
        out.append({(e.evictor_job or "", e.job) for e in result.evictions if e.action == "reclaim"})
        snap = advance(snap, result)
    return out


def assert_no_ping_pong(pairs: list[set[tuple[str, str]]]) -> None:
    for k in range(len(pairs) - 1):
        again = pairs[k] & pairs[k + 1]
        assert not again, f"rounds {k + 1} and {k + 2} both reclaim {sorted(again)}"


def test_trace_example_no_ping_pong() -> None:
    """Modelled on the trace: team-d (lower ratio) gets the only free GPU from allocate; team-c's
    1-GPU job would take it back by reclaim, and next cycle allocate would serve team-d's job
    first again (team-c is represented by its larger head job)."""
    root = Queue("root", resources={"gpu": QueueResource(-1, -1, 1)})
    snap = Snapshot(
        nodes=[Node("n0", gpus=4)],
        queues=[root, _gpu_queue("team-d", 2, 2, 1), _gpu_queue("team-c", 2, 2, 2)],
        jobs=[
            _job("d-big", "team-d", 2, 360, "n0"),
            _job("d-small", "team-d", 1, 300),
            _job("c-run", "team-c", 1, 240, "n0"),
            _job("c-head", "team-c", 3, 180),
            _job("c-small", "team-c", 1, 120),
        ],
    )
    pairs = reclaim_pairs(snap)
    assert_no_ping_pong(pairs)
    # the free GPU stays with team-d's job from the first round on: nothing is reclaimed
    assert not any(pairs[1:])


@st.composite
def contested(draw: st.DrawFn) -> Snapshot:
    """A full or nearly full cluster shared by 2-3 queues with pending work in each."""
    nodes = [Node(f"n{i}", gpus=draw(st.sampled_from([2, 4]))) for i in range(draw(st.integers(1, 2)))]
    nq = draw(st.integers(2, 3))
    queues = [Queue("root", resources={"gpu": QueueResource(-1, -1, 1)})]
    for i in range(nq):
        quota = draw(st.sampled_from([0, 1, 2]))
        queues.append(_gpu_queue(f"q{i}", quota, draw(st.sampled_from([1, 2])), i + 1))
    free = {n.name: n.gpus for n in nodes}
    jobs = []
    for j in range(draw(st.integers(2, 7))):
        gpu = draw(st.sampled_from([1, 1, 2, 3]))
        queue = f"q{draw(st.integers(0, nq - 1))}"
        node = None
        if draw(st.booleans()):
            node = next((n for n, f in free.items() if f >= gpu), None)
            if node is not None:
                free[node] -= gpu
        jobs.append(_job(f"j{j}", queue, gpu, draw(st.integers(0, 1000)), node))
    return Snapshot(nodes, queues, jobs)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested())
def test_no_reclaim_ping_pong_on_random_snapshots(snap: Snapshot) -> None:
    assert_no_ping_pong(reclaim_pairs(snap))
