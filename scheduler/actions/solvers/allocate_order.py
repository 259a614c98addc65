"""The order the next allocate would pop the preemptor and the victim jobs in (§3.3, §4.1,
§4.2), which a simulated scenario follows to place the preemptor and re-place its victims."""

from __future__ import annotations

from scheduler import gang
from scheduler.actions.common.queues import request_of
from scheduler.actions.solvers.victim_order import KeyMemo
from scheduler.model import Job, Task
from scheduler.ordering import JobQueue, job_key, job_request, queue_key
from scheduler.session import Session
from scheduler.state import QueueState


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


_Best = tuple[tuple[object, ...], QueueState, str, dict[str, float], bool]  # key, queue, leaf, request, other


class AllocateOrder:
    """The preemptor and the victim jobs in the order the next allocate would pop them (§3.3,
    §4.1, §4.2), re-evaluated after every pop on the simulation's current state.

    Each queue is represented by the best pending job of its subtree: a victim job asking for
    the tasks it lost, the preemptor, or another pending job (``heads``) of a leaf that holds one
    of them. Such another job keeps representing its leaf - a big job that does not fit included -
    until it comes up; then allocate places or drops it and the leaf is represented by its next
    job. Subtrees without simulation jobs left take no part."""

    def __init__(
        self, session: Session, entries: list[tuple[Job, list[Task]]], heads: PendingHeads | None
    ) -> None:
        self.session = session
        self.heads = heads
        self.in_sim = {j.key for j, _ in entries}
        self.sim: dict[str, list[tuple[tuple[object, ...], int, tuple[Job, list[Task]]]]] = {}
        for i, e in enumerate(entries):
            self.sim.setdefault(e[0].queue, []).append((job_key(session, e[0]), i, e))
        for lst in self.sim.values():
            lst.sort(key=lambda x: (x[0], x[1]), reverse=True)
        self.pos: dict[str, int] = {}  # next index into heads.by_leaf per leaf
        self.keys = heads.keys if heads is not None else {}
        self.live: dict[str, int] = {}  # simulation jobs left per queue (subtree)
        for leaf, lst in self.sim.items():
            for qs in session.ancestors(leaf):
                self.live[qs.name] = self.live.get(qs.name, 0) + len(lst)
        self.tops = [
            q
            for q, qs in session.queues.items()
            if not qs.queue.parent or qs.queue.parent not in session.queues
        ]
        # Each queue's entry (its key with its subtree's representative), valid while neither its
        # allocation (``session.queue_stamp``) nor a leaf below it (``ver``: a pop) changed.
        self.ver: dict[str, int] = {}
        self.memo: dict[str, tuple[tuple[int, int], _Best | None]] = {}

    def _touch(self, leaf: str) -> None:
        for qs in self.session.ancestors(leaf):
            self.ver[qs.name] = self.ver.get(qs.name, 0) + 1

    def _other(self, leaf: str) -> tuple[tuple[object, ...], Job] | None:
        """The next pending job of the leaf from ``heads`` that is not in the simulation."""
        if self.heads is None:
            return None
        lst = self.heads.by_leaf.get(leaf, [])
        i = self.pos.get(leaf, 0)
        while i < len(lst):
            key, name = lst[i]
            job = self.session.jobs[name]
            if name not in self.in_sim and gang.pending_tasks(self.session, job):
                break
            i += 1
        self.pos[leaf] = i
        return (lst[i][0], self.session.jobs[lst[i][1]]) if i < len(lst) else None

    def _head(self, leaf: str) -> tuple[dict[str, float], bool] | None:
        """The leaf's representative: its request, and whether it is another job (not a sim job)."""
        lst = self.sim.get(leaf)
        if not lst:
            return None
        key, _, (_, tasks) = lst[-1]
        other = self._other(leaf)
        if other is not None and other[0] < key:
            assert self.heads is not None
            return self.heads.request(other[1]), True
        return request_of(self.session, tasks), False

    def _best(self, queues: list[str]) -> _Best | None:
        """Top-down: the leaf whose representative goes next among ``queues``' subtrees."""
        best: _Best | None = None
        for q in queues:
            if not self.live.get(q):
                continue
            e = self._entry(q)
            if e is not None and (best is None or JobQueue.better(e[1], e[0], best[1], best[0])):
                best = e
        return best

    def _entry(self, q: str) -> _Best | None:
        session = self.session
        stamp = (session.queue_stamp.get(q, 0), self.ver.get(q, 0))
        hit = self.memo.get(q)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        qs = session.queues[q]
        found: _Best | None = None
        if qs.is_leaf:
            h = self._head(q)
            rep = None if h is None else (q, h[0], h[1])
        else:
            sub = self._best(qs.children)
            rep = None if sub is None else (sub[2], sub[3], sub[4])
        if rep is not None:
            leaf, req, other = rep
            mk = (q, tuple(qs.allocated.values()), tuple(req.values()))
            hit_k = self.keys.get(mk)
            if hit_k is not None and hit_k[0] is qs.fair_share:
                k = hit_k[1]
            else:
                k = queue_key(qs, req, session.capacity)
                self.keys[mk] = (qs.fair_share, k)
            found = (k, qs, leaf, req, other)
        self.memo[q] = (stamp, found)
        return found

    def pop(self) -> tuple[Job, list[Task]] | None:
        while True:
            found = self._best(self.tops)
            if found is None:
                return None
            leaf, other = found[2], found[4]
            self._touch(leaf)
            if other:
                # allocate places or drops it; either way it no longer represents the leaf
                self.pos[leaf] = self.pos.get(leaf, 0) + 1
                continue
            entry = self.sim[leaf].pop()[2]
            for qs in self.session.ancestors(leaf):
                self.live[qs.name] -= 1
            return entry
