"""The order the next allocate would pop the preemptor and the victim jobs in (§3.3, §4.1,
§4.2), which a simulated scenario follows to place the preemptor and re-place its victims."""

from __future__ import annotations

from scheduler import gang
from scheduler.actions.common.queues import request_of
from scheduler.actions.solvers.victim_order import KeyMemo
from scheduler.model import Job, Task
from scheduler.ordering import QueueTree, job_key, job_request, queue_key
from scheduler.session import Session
from scheduler.state import QueueState

# A queue key with the allocation stamp and fair-share dict it was computed under.
_Stamped = tuple[int, dict[str, float], tuple[object, ...]]


class PendingHeads:
    """The eligible pending jobs of each leaf queue in job order (§4.2), taken when an action
    starts: what the next allocate would see of the queues the simulation does not touch."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.by_leaf: dict[str, list[tuple[tuple[object, ...], str]]] = {}
        self.requests: dict[str, dict[str, float]] = {}
        # Queue keys by (queue, its allocation, the request it is keyed with), for every
        # simulation of the action: nothing else a key reads changes within a cycle (fair shares
        # are replaced as a whole dict, checked by identity), and the simulations evict and
        # re-place the same victims again and again, so their queues come back to the same
        # allocations.
        self.keys: KeyMemo = {}

    def add(self, job: Job) -> None:
        self.by_leaf.setdefault(job.queue, []).append((job_key(self.session, job), job.key))

    def freeze(self) -> None:
        for lst in self.by_leaf.values():
            lst.sort()

    def request(self, job: Job) -> dict[str, float]:
        req = self.requests.get(job.key)
        if req is None:
            req = self.requests[job.key] = job_request(self.session, job)
        return req


class AllocateOrder(QueueTree):
    """The preemptor and the victim jobs in the order the next allocate would pop them (§3.3,
    §4.1, §4.2; KAI's ``GetJobsToAllocate`` + ``PopNextJob``), walked on the simulation's current
    state through KAI's tree of heaps (``QueueTree``: a parent keeps the child that was on top
    until the walk comes down into it again).

    A leaf's next entry is its best pending job: a victim job asking for the tasks it lost, the
    preemptor, or another pending job (``heads``) of a leaf that holds one of them. Such another
    job keeps representing its leaf - a big job that does not fit included - until it comes up;
    then allocate places or drops it and the leaf is represented by its next job. Every leaf
    with a pending job takes part, as in ``GetJobsToAllocate`` (the tree's marks and tops depend
    on every pop); popping another job changes nothing else, and the walk ends with the last
    simulation job."""

    def __init__(
        self, session: Session, entries: list[tuple[Job, list[Task]]], heads: PendingHeads | None
    ) -> None:
        super().__init__(session, session.capacity)
        self.heads = heads
        self.in_sim = {j.key for j, _ in entries}
        self.sim: dict[str, list[tuple[tuple[object, ...], int, tuple[Job, list[Task]]]]] = {}
        for i, e in enumerate(entries):
            self.sim.setdefault(e[0].queue, []).append((job_key(session, e[0]), i, e))
        for lst in self.sim.values():
            lst.sort(key=lambda x: (x[0], x[1]), reverse=True)
        self.pos: dict[str, int] = {}  # next index into heads.by_leaf per leaf
        self.keys = heads.keys if heads is not None else {}
        # Each leaf's next entry (request, shape, whether another job), until the leaf pops: the
        # simulation places only its own jobs, so whether another job is pending, and every
        # request, stay as they are while this order lives.
        self.head_memo: dict[str, tuple[dict[str, float], tuple[float, ...], bool]] = {}
        # Queue keys by (queue, shape) while the queue's allocation stamp (``queue_stamp``: every
        # charge and undo bumps it) and fair-share dict are unchanged: the walk re-keys the same
        # siblings after each pop, and ``keys`` needs the allocation read out to look one up.
        self.stamped: dict[tuple[str, tuple[float, ...]], _Stamped] = {}
        self.leaves = {name for name, qs in session.queues.items() if qs.is_leaf}
        # ``_tail_first`` per pair of queues: it reads only their fair shares (set when the
        # session opens) and their age and name.
        self.tail_memo: dict[tuple[str, str], bool] = {}
        self.left = len(entries)  # simulation jobs not popped yet
        # Every pending job left per subtree (GetJobsToAllocate orders them all).
        self.live: dict[str, int] = {}
        counts = {leaf: len(lst) for leaf, lst in self.sim.items()}
        if heads is not None:
            for leaf, pending in heads.by_leaf.items():
                n = sum(1 for _, name in pending if self._is_other(name))
                counts[leaf] = counts.get(leaf, 0) + n
        for leaf, n in counts.items():
            if n:
                for q in [*(qs.name for qs in session.ancestors(leaf)), self.ROOT]:
                    self.live[q] = self.live.get(q, 0) + n

    def _alive(self, queue: str) -> bool:
        return self.live.get(queue, 0) > 0

    def _is_other(self, name: str) -> bool:
        return name not in self.in_sim and bool(gang.pending_tasks(self.session, self.session.jobs[name]))

    def _other(self, leaf: str) -> tuple[tuple[object, ...], Job] | None:
        """The next pending job of the leaf from ``heads`` that is not in the simulation."""
        if self.heads is None:
            return None
        lst = self.heads.by_leaf.get(leaf, [])
        i = self.pos.get(leaf, 0)
        while i < len(lst):
            if self._is_other(lst[i][1]):
                break
            i += 1
        self.pos[leaf] = i
        return (lst[i][0], self.session.jobs[lst[i][1]]) if i < len(lst) else None

    def _head(self, leaf: str) -> tuple[dict[str, float], tuple[float, ...], bool]:
        """The leaf's next entry: its request, that as a tuple, and whether it is another job
        (not a sim job); kept in ``head_memo`` until the leaf pops."""
        hit = self.head_memo.get(leaf)
        if hit is not None:
            return hit
        lst = self.sim.get(leaf)
        other = self._other(leaf)
        if other is not None and (not lst or other[0] < lst[-1][0]):
            assert self.heads is not None
            req, is_other = self.heads.request(other[1]), True
        else:
            assert lst
            req, is_other = request_of(self.session, lst[-1][2][1]), False
        hit = self.head_memo[leaf] = (req, tuple(req.values()), is_other)
        return hit

    def _leaf_request(self, leaf: str) -> tuple[dict[str, float], tuple[float, ...]]:
        hit = self._head(leaf)
        return hit[0], hit[1]

    def _key(self, queue: str) -> tuple[object, ...]:
        """``QueueTree._key`` with the leaves read from a set: the walk keys every sibling on
        its path after each pop."""
        leaf = queue
        leaves = self.leaves
        while leaf not in leaves:
            leaf = self._top(leaf)
        hit = self._head(leaf)
        return self._queue_key(queue, hit[0], hit[1])

    def _tail_first(self, a: str, b: str) -> bool:
        pair = (a, b)
        hit = self.tail_memo.get(pair)
        if hit is None:
            hit = self.tail_memo[pair] = super()._tail_first(a, b)
        return hit

    def _queue_key(self, queue: str, req: dict[str, float], shape: tuple[float, ...]) -> tuple[object, ...]:
        qs = self.session.queues[queue]
        sk = (queue, shape)
        stamp = self.session.queue_stamp.get(queue, 0)
        got = self.stamped.get(sk)
        if got is not None and got[0] == stamp and got[1] is qs.fair_share:
            return got[2]
        key = self._allocation_key(qs, queue, req, shape)
        self.stamped[sk] = (stamp, qs.fair_share, key)
        return key

    def _allocation_key(
        self, qs: QueueState, queue: str, req: dict[str, float], shape: tuple[float, ...]
    ) -> tuple[object, ...]:
        """The queue key through the action's memo by allocation (``PendingHeads.keys``)."""
        mk = (queue, tuple(qs.allocated.values()), shape)
        hit = self.keys.get(mk)
        if hit is not None and hit[0] is qs.fair_share:
            return hit[1]
        key = queue_key(qs, req, self.session.capacity)
        self.keys[mk] = (qs.fair_share, key)
        return key

    def pop(self) -> tuple[Job, list[Task]] | None:
        while self.left and (leaf := self._walk()) is not None:
            other = self._head(leaf)[2]
            del self.head_memo[leaf]  # the leaf's next entry changes with this pop
            if other:
                # allocate places or drops it; either way it no longer represents the leaf
                self.pos[leaf] = self.pos.get(leaf, 0) + 1
            for qs in self.session.ancestors(leaf):
                self.live[qs.name] -= 1
            self.live[self.ROOT] -= 1
            if other:
                self._popped(leaf)
                continue
            entry = self.sim[leaf].pop()[2]
            self.left -= 1
            self._popped(leaf)
            return entry
        return None
