"""The victim order walks KAI's victim queue lazily, as its job queue does.

KAI builds its victim queue with the same tree of heaps as its job queue
(``actions/utils/action.go: newVictimsQueueFromCandidates`` -> ``job_order_by_queue.go``, with
``VictimQueue`` set): a pop only marks the popped leaf and its ancestors, and a parent is compared at
the level above through the child that was on top of its heap before the pop (``getBestJobFromNode``
peeks), with that child's popped entries and its next one (``getVictimsForQueue``). The child is
re-placed among its siblings only when the walk comes down into the parent (``getNextNode``).
"""

from __future__ import annotations

from scheduler import Config
from scheduler.actions.solvers.victim_order import _VictimStream, active_tasks, victim_stream
from scheduler.bench.equivalence import random_snapshot
from scheduler.cycle import open_session
from scheduler.session import Session


def _session(seed: int) -> Session:
    snap = random_snapshot(seed)
    return open_session(snap, Config(), snap.nodes[0].pool)


def test_parent_compared_through_its_previous_top_child() -> None:
    # Equivalence cluster 142: top queues d0 (leaves q0, q2, q4) and d1 (q1, q3). The first victim
    # is j43 of q0 (under d0). d0 is then still represented at the top by q0, whose listed charge
    # is j43 and its next job j10: that key beats d1's, so d0 gives again; walking down, d0
    # re-places q0 and q2 comes on top, giving j3. A fresh top-down choice would have compared d0
    # through q2's j3, whose key is below d1's, and given d1's j50 second.
    session = _session(142)
    cands = [j for j in session.jobs.values() if active_tasks(session, j)]
    order = [(c.job.name, c.job.queue) for c in victim_stream(session, cands, set(), limit=3)]
    assert order == [("j43", "q0"), ("j3", "q2"), ("j50", "q1")]

    stream = _VictimStream(session, cands, set(), None)
    stream.take(1)

    def key_through(leaf: str, parent: str) -> tuple[object, ...]:
        job = stream.jobs[stream.heaps[leaf][0][1]]
        return stream.order_key(parent, stream.listed_charge(leaf, job))

    assert stream.jobs[stream.heaps["q0"][0][1]].name == "j10"
    stale, fresh, other = key_through("q0", "d0"), key_through("q2", "d0"), key_through("q1", "d1")
    assert stale > other > fresh


def test_stream_is_a_prefix_of_the_whole_stream() -> None:
    # ``limit`` stops the same walk early: the lazy marks never depend on how far it goes.
    for seed in (5, 41, 142, 386):
        session = _session(seed)
        cands = [j for j in session.jobs.values() if active_tasks(session, j)]
        whole = [(c.job.key, tuple(t.key for t in c.tasks)) for c in victim_stream(session, cands, set())]
        for n in (1, 2, 5):
            part = victim_stream(session, cands, set(), limit=n)
            assert [(c.job.key, tuple(t.key for t in c.tasks)) for c in part] == whole[:n]
