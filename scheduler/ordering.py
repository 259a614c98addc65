"""Which queue and which job go next (kai-semantics.md §2.6, §4.1, §4.2)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from scheduler import gang
from scheduler.model import RESOURCES, Job, clean
from scheduler.session import Session
from scheduler.state import QueueState

INF = float("inf")


def allocatable_share(qs: QueueState, r: str) -> float:
    """AS: the quota when unlimited (-1 means unlimited), else max(quota, FS) capped at the limit."""
    return qs.allocatable()[r]


def queue_key(
    qs: QueueState, job_req: Mapping[str, float], capacity: Mapping[str, float]
) -> tuple[object, ...]:
    """Sort key of a queue represented by its best pending job; smaller goes first (§4.1)."""
    a_s = qs.allocatable()
    alloc = qs.allocated
    fs = qs.fair_share
    quotas = qs.quotas()
    over = True
    starved = True
    zero_share = False
    with_job = without = -INF
    for r in RESOURCES:
        a, j, as_r = alloc[r], job_req.get(r, 0.0), a_s[r]
        over = over and a > fs[r] + 1e-9
        if starved:
            d = quotas[r]
            if d >= 0 and clean(a + j) > d + 1e-9:
                starved = False
        if as_r == 0 and a + j > 0:
            zero_share = True
        if as_r < 0:
            as_r = capacity.get(r, 0.0)
        # _share(), inline: a queue with no share pays a heavy penalty for what it holds
        w = (a + j) / as_r if as_r > 0 else (a + j) * 1000
        wo = a / as_r if as_r > 0 else a * 1000
        if w > with_job:
            with_job = w
        if wo > without:
            without = wo
    return (over, not starved, -qs.queue.priority, zero_share, round(with_job, 9), round(without, 9))


def job_key(session: Session, job: Job) -> tuple[object, ...]:
    """Order inside a leaf queue: priority, elastic state, age, the arrival tie-break (KAI's PodGroup
    name), name (§4.2); where two jobs of one name tie, whoever holds the key adds it after
    (``JobQueue``'s heap entries)."""
    return (-job.priority, gang.elastic_state(session, job), -job.created_s, job.arrival_tiebreak, job.name)


def job_request(session: Session, job: Job) -> dict[str, float]:
    """Resources of the job's next step, as fair share counts them."""
    total = dict.fromkeys(RESOURCES, 0.0)
    for t in gang.step_tasks(session, job):
        for r, v in session.pending_request(t).items():
            total[r] = clean(total[r] + v)
    return total


class QueueTree:
    """KAI's tree of heaps (``actions/utils/job_order_by_queue.go``): per parent queue (and at
    the top) a heap of its child queues, each leaf holding its jobs in job order. A subclass keeps
    the leaves: which queues hold entries (``_alive``) and what a leaf's next entry asks
    (``_leaf_request``).

    A child queue is ordered by its representative: the entry reached by following each heap's
    top down to a leaf (``getBestJobFromNode`` peeks; it never re-orders). A pop only marks its
    path (``markAncestorsForReorder``); a marked queue is re-placed among its siblings when it is
    next on top of the heap being walked (``getNextNode``: ``Fix(0)``). So until the walk comes
    down into a parent again, the parent still shows the child that was on top before the pop,
    and is compared at the level above with that child's next job, which need not be its best
    any more (a big job behind the one just placed, say). ``top`` keeps each heap's top and
    ``marked`` the marks, re-placed exactly where KAI re-places them.

    Heaps are ordered as they stand when the first walk needs them (KAI pushes the jobs in map
    order, so where a later push would reorder a parent the result is KAI's own tie)."""

    ROOT = ""  # the heap of top-level queues

    def __init__(self, session: Session, capacity: Mapping[str, float]) -> None:
        self.session = session
        self.capacity = capacity
        self.top: dict[str, str] = {}  # a parent's (or ROOT's) child on top of its heap
        self.marked: set[str] = set()
        self.started = False  # a walk happened: later pushes link as KAI's PushJob does
        self.tails: dict[str, tuple[dict[str, float], list[float], tuple[int, str]]] = {}
        self.tops = [
            qs.name
            for qs in session.queues.values()
            if not (qs.queue.parent is not None and qs.queue.parent in session.queues)
        ]
        # The leaf queues (a session's tree does not change): the walk asks for every queue on
        # its path and every sibling it keys.
        self.leaves = {name for name, qs in session.queues.items() if qs.is_leaf}

    def _alive(self, queue: str) -> bool:
        """Whether the queue's subtree holds an entry (the queue is in the tree)."""
        raise NotImplementedError

    def _leaf_request(self, leaf: str) -> tuple[dict[str, float], tuple[float, ...]]:
        """What the leaf's next entry asks (its next step), and that as a tuple over RESOURCES."""
        raise NotImplementedError

    def _queue_key(self, queue: str, req: dict[str, float], shape: tuple[float, ...]) -> tuple[object, ...]:
        raise NotImplementedError

    def _walk(self) -> str | None:
        """traverseToLeaf: the leaf whose next entry goes now, or None when none is left."""
        if not self._alive(self.ROOT):
            return None
        self.started = True
        queue = self._next(self.ROOT)
        leaves = self.leaves
        while queue not in leaves:
            queue = self._next(queue)
        return queue

    def _linked(self, leaf: str, entered: list[str]) -> None:
        """After a push to ``leaf``: PushJob links each queue that entered the tree (leaf first)
        into its parent's heap (on top iff it goes before the top: Push sifts up), and marks the
        leaf and its ancestors. Before the first walk nothing is linked yet."""
        if not self.started:
            return
        for q in entered:
            parent = self._parent(q)
            top = self.top.get(parent)
            if top is None or not self._alive(top) or top == q or self._before(q, top):
                self.top[parent] = q
        self.marked.update(qs.name for qs in self.session.ancestors(leaf))

    def _popped(self, queue: str) -> None:
        """handlePopFromNode, after an entry left ``queue``: an emptied queue leaves its parent's
        heap (the next best child comes to the top), and so on upwards; the first queue that still
        holds entries is marked with its ancestors."""
        while not self._alive(queue):
            self.marked.discard(queue)
            self.top.pop(queue, None)
            if queue == self.ROOT:
                return
            parent = self._parent(queue)
            if self._alive(parent):
                self.top[parent] = self._best(parent)
            queue = parent
        if queue != self.ROOT:
            self.marked.update(qs.name for qs in self.session.ancestors(queue))

    def _parent(self, queue: str) -> str:
        parent = self.session.queues[queue].queue.parent
        return parent if parent is not None and parent in self.session.queues else self.ROOT

    def _next(self, parent: str) -> str:
        """getNextNode: the heap's top, re-placed first while it is marked."""
        while True:
            top = self._top(parent)
            if top not in self.marked:
                return top
            self.marked.discard(top)
            self.top[parent] = self._best(parent)

    def _top(self, parent: str) -> str:
        top = self.top.get(parent)
        if top is None:
            top = self.top[parent] = self._best(parent)
        return top

    def _best(self, parent: str) -> str:
        """The child that goes first by the representatives as they stand (``Fix`` or ``Pop`` on
        a heap whose other entries are in order)."""
        kids = self.tops if parent == self.ROOT else self.session.queues[parent].children
        best: str | None = None
        best_key: tuple[object, ...] = ()
        for child in kids:
            if not self._alive(child):
                continue
            key = self._key(child)
            if best is None or self._first(key, best_key, child, best):
                best, best_key = child, key
        assert best is not None, parent
        return best

    def _key(self, queue: str) -> tuple[object, ...]:
        leaf = queue
        leaves = self.leaves
        while leaf not in leaves:
            leaf = self._top(leaf)
        req, shape = self._leaf_request(leaf)
        return self._queue_key(queue, req, shape)

    def _before(self, a: str, b: str) -> bool:
        """KAI's QueueOrderFn on the representatives."""
        return self._first(self._key(a), self._key(b), a, b)

    def _first(self, ka: tuple[object, ...], kb: tuple[object, ...], a: str, b: str) -> bool:
        """Whether queue ``a`` (key ``ka``) goes before ``b``: the smaller key, then ``_tail_first``."""
        if ka != kb:
            return ka < kb
        return self._tail_first(a, b)

    def _tail(self, name: str) -> tuple[list[float], tuple[int, str]]:
        qs = self.session.queues[name]
        fs = qs.fair_share
        hit = self.tails.get(name)
        if hit is None or hit[0] is not fs:  # allocatable() is a function of the fair-share dict
            a_s = qs.allocatable()
            hit = self.tails[name] = (fs, [a_s[r] for r in RESOURCES], (qs.queue.created_index, qs.name))
        return hit[1], hit[2]

    def _tail_first(self, a: str, b: str) -> bool:
        """Keys 7 and 8: the allocatable-share vector Pareto-smaller first, then older, then name."""
        va, ka = self._tail(a)
        vb, kb = self._tail(b)
        if va != vb:
            if all(x <= y for x, y in zip(va, vb, strict=True)):
                return True
            if all(y <= x for x, y in zip(va, vb, strict=True)):
                return False
        return ka < kb


class JobQueue(QueueTree):
    """Pending jobs in KAI's tree of heaps (``QueueTree``), as allocate, reclaim, preempt and
    consolidation pop them. Keys are cached per queue and request shape while the queue's
    allocation (``session.queue_stamp``) is unchanged."""

    def __init__(self, session: Session, capacity: Mapping[str, float]) -> None:
        super().__init__(session, capacity)
        self.heaps: dict[str, list[tuple[tuple[object, ...], str]]] = {}
        self.live: dict[str, int] = {}  # jobs in the subtree of each queue (and ROOT)
        # A job's next-step request, valid while its leaf queue's stamp is unchanged (its tasks'
        # placements only change through a charge or uncharge, which bumps that stamp).
        self.requests: dict[str, tuple[int, dict[str, float], tuple[float, ...]]] = {}
        self.keys: dict[tuple[str, tuple[float, ...]], tuple[int, tuple[object, ...]]] = {}

    def push(self, job: Job) -> None:
        leaf = job.queue
        heapq.heappush(self.heaps.setdefault(leaf, []), (job_key(self.session, job), job.key))
        path = [qs.name for qs in self.session.ancestors(leaf)]
        entered = [q for q in path if not self.live.get(q)]
        for q in [*path, self.ROOT]:
            self.live[q] = self.live.get(q, 0) + 1
        self._linked(leaf, entered)

    def pop(self) -> Job | None:
        """Remove and return the job that goes next, or None when all are done."""
        leaf = self._walk()
        if leaf is None:
            return None
        _, name = heapq.heappop(self.heaps[leaf])
        for qs in self.session.ancestors(leaf):
            self.live[qs.name] -= 1
        self.live[self.ROOT] -= 1
        self._popped(leaf)
        return self.session.jobs[name]

    def _alive(self, queue: str) -> bool:
        return self.live.get(queue, 0) > 0

    def _leaf_request(self, leaf: str) -> tuple[dict[str, float], tuple[float, ...]]:
        name = self.heaps[leaf][0][1]  # the job's key
        stamp = self.session.queue_stamp.get(leaf, 0)
        hit = self.requests.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1], hit[2]
        req = job_request(self.session, self.session.jobs[name])
        shape = tuple(req.get(r, 0.0) for r in RESOURCES)
        self.requests[name] = (stamp, req, shape)
        return req, shape

    def _queue_key(self, queue: str, req: dict[str, float], shape: tuple[float, ...]) -> tuple[object, ...]:
        qstamp = self.session.queue_stamp.get(queue, 0)
        hit = self.keys.get((queue, shape))
        if hit is not None and hit[0] == qstamp:
            return hit[1]
        key = queue_key(self.session.queues[queue], req, self.capacity)
        self.keys[(queue, shape)] = (qstamp, key)
        return key
