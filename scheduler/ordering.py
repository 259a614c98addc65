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


def _pareto_tail(a: QueueState, b: QueueState) -> int:
    """Key 7 and 8: allocatable-share vector Pareto-smaller first, then older, then name."""
    aa, ab = a.allocatable(), b.allocatable()
    va = [aa[r] for r in RESOURCES]
    vb = [ab[r] for r in RESOURCES]
    if va != vb:
        if all(x <= y for x, y in zip(va, vb, strict=True)):
            return -1
        if all(y <= x for x, y in zip(va, vb, strict=True)):
            return 1
    ka = (a.queue.created_index, a.name)
    kb = (b.queue.created_index, b.name)
    return -1 if ka < kb else (1 if ka > kb else 0)


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


class JobQueue:
    """Pending jobs in a heap per leaf queue; the best queue is chosen top-down on every pop.

    The choice is re-evaluated after every pop (§4.2), but a subtree's best job and its queue key
    are only recomputed when something below it changed: a job charged or uncharged
    (``session.queue_stamp``) or a push or pop on one of its leaf heaps."""

    def __init__(self, session: Session, capacity: Mapping[str, float]) -> None:
        self.session = session
        self.capacity = capacity
        self.heaps: dict[str, list[tuple[tuple[object, ...], str]]] = {}
        self.heap_stamp: dict[str, int] = {}
        # Per queue: (queue stamp, heap stamp, its entry) as of those stamps.
        self.memo: dict[str, tuple[int, int, tuple[Job, tuple[object, ...]] | None]] = {}
        # A job's next-step request, valid while its leaf queue's stamp is unchanged (its tasks'
        # placements only change through a charge or uncharge, which bumps that stamp); the same
        # job represents its leaf and every ancestor, so it is asked for once per change.
        self.requests: dict[str, tuple[int, dict[str, float], tuple[float, ...]]] = {}
        self.keys: dict[tuple[str, tuple[float, ...]], tuple[int, tuple[object, ...]]] = {}
        self.tails: dict[str, tuple[dict[str, float], list[float], tuple[int, str]]] = {}
        self.tops = [
            qs.name
            for qs in session.queues.values()
            if not (qs.queue.parent is not None and qs.queue.parent in session.queues)
        ]

    def _touch(self, queue: str) -> None:
        for qs in self.session.ancestors(queue):
            self.heap_stamp[qs.name] = self.heap_stamp.get(qs.name, 0) + 1

    def push(self, job: Job) -> None:
        heapq.heappush(self.heaps.setdefault(job.queue, []), (job_key(self.session, job), job.key))
        if self.memo:  # nothing cached yet (the first pushes): nothing to invalidate
            self._touch(job.queue)

    def _entry(self, queue: str) -> tuple[Job, tuple[object, ...]] | None:
        """The subtree's best job and the queue's key for it (cached until the subtree changes)."""
        qstamp = self.session.queue_stamp.get(queue, 0)
        hstamp = self.heap_stamp.get(queue, 0)
        hit = self.memo.get(queue)
        if hit is not None and hit[0] == qstamp and hit[1] == hstamp:
            return hit[2]
        cand = self._best_in(queue)
        out = None
        if cand is not None:
            req, shape = self._request(cand)
            # The key is a function of the queue's own state (its stamp) and the request: jobs
            # of one shape give one key, so a pop that only changes which job represents the
            # queue does not recompute it.
            hit_key = self.keys.get((queue, shape))
            if hit_key is not None and hit_key[0] == qstamp:
                key = hit_key[1]
            else:
                key = queue_key(self.session.queues[queue], req, self.capacity)
                self.keys[(queue, shape)] = (qstamp, key)
            out = (cand, key)
        self.memo[queue] = (qstamp, hstamp, out)
        return out

    def _request(self, job: Job) -> tuple[dict[str, float], tuple[float, ...]]:
        stamp = self.session.queue_stamp.get(job.queue, 0)
        hit = self.requests.get(job.key)
        if hit is not None and hit[0] == stamp:
            return hit[1], hit[2]
        req = job_request(self.session, job)
        shape = tuple(req.get(r, 0.0) for r in RESOURCES)
        self.requests[job.key] = (stamp, req, shape)
        return req, shape

    def _best_in(self, queue: str) -> Job | None:
        qs = self.session.queues[queue]
        if qs.is_leaf:
            heap = self.heaps.get(queue)
            return self.session.jobs[heap[0][1]] if heap else None
        return self._best_of(qs.children)

    def _best_of(self, queues: list[str]) -> Job | None:
        """The best of these queues' entries: smaller key first, on a tie ``_pareto_tail``
        (``better``, with each queue's tail read once per fair share)."""
        qstamp = self.session.queue_stamp
        hstamp = self.heap_stamp
        memo = self.memo
        best: tuple[str, Job, tuple[object, ...]] | None = None
        for child in queues:
            hit = memo.get(child)
            if hit is not None and hit[0] == qstamp.get(child, 0) and hit[1] == hstamp.get(child, 0):
                entry = hit[2]  # _entry(child), unchanged since it was made
            else:
                entry = self._entry(child)
            if entry is None:
                continue
            cand, key = entry
            if best is None:
                best = (child, cand, key)
                continue
            best_key = best[2]
            if key != best_key:
                if key < best_key:
                    best = (child, cand, key)
            elif self._tail_first(child, best[0]):
                best = (child, cand, key)
        return best[1] if best else None

    def _tail(self, name: str) -> tuple[list[float], tuple[int, str]]:
        qs = self.session.queues[name]
        fs = qs.fair_share
        hit = self.tails.get(name)
        if hit is None or hit[0] is not fs:  # allocatable() is a function of the fair-share dict
            a_s = qs.allocatable()
            hit = self.tails[name] = (fs, [a_s[r] for r in RESOURCES], (qs.queue.created_index, qs.name))
        return hit[1], hit[2]

    def _tail_first(self, a: str, b: str) -> bool:
        """``_pareto_tail(a, b) < 0``."""
        va, ka = self._tail(a)
        vb, kb = self._tail(b)
        if va != vb:
            if all(x <= y for x, y in zip(va, vb, strict=True)):
                return True
            if all(y <= x for x, y in zip(va, vb, strict=True)):
                return False
        return ka < kb

    @staticmethod
    def better(a: QueueState, ka: tuple[object, ...], b: QueueState, kb: tuple[object, ...]) -> bool:
        if ka != kb:
            return ka < kb
        return _pareto_tail(a, b) < 0

    def pop(self) -> Job | None:
        """Remove and return the job that goes next, or None when all are done."""
        job = self._best_of(self.tops)
        if job is None:
            return None
        heapq.heappop(self.heaps[job.queue])
        self._touch(job.queue)
        return job
