"""Victim order (kai-semantics.md §4.4): the contributions candidate victim jobs give, in the
order they give them (KAI's victim queue, ``framework/session``'s ``VictimQueue`` order)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from scheduler import gang
from scheduler.actions.solvers.scenario import Contribution
from scheduler.model import RESOURCES, Job, Task, TaskState
from scheduler.ordering import QueueTree, allocatable_share
from scheduler.session import Session
from scheduler.state import EPS, QueueState

ACTIVE = gang.ACTIVE_ALLOCATED
# Statuses whose tasks count in a job's ``AllocatedVector`` (KAI's ``pod_status.AllocatedStatus``).
_ALLOCATED_STATUS = (TaskState.RUNNING, TaskState.ALLOCATED)


# Queue keys by (queue, its allocation, a request or an allocation after), with the fair-share
# dict they were computed for (a key reads nothing else that changes within a cycle).
KeyMemo = dict[tuple[str, tuple[float, ...], tuple[float, ...]], tuple[object, tuple[object, ...]]]


def active_tasks(session: Session, job: Job) -> list[Task]:
    return [t for t in job.tasks if gang.status(session, t) in ACTIVE]


def _charge(session: Session, task: Task) -> dict[str, float]:
    return session.placements[task.key].charge


def _drf(qs: QueueState, alloc: dict[str, float], cap: dict[str, float]) -> float:
    drf = 0.0
    for r in RESOURCES:
        a_s = allocatable_share(qs, r)
        if a_s < 0:
            a_s = cap.get(r, 0.0)
        share = alloc[r] * 1000 if a_s <= 0 else alloc[r] / a_s
        drf = max(drf, share)
    return round(drf, 9)


def _alloc_order_key(qs: QueueState, after: dict[str, float], cap: dict[str, float]) -> tuple[object, ...]:
    """Allocation-order key of a queue giving victims (the larger, the sooner it gives).

    As KAI's queue order with victims (``queue_order.GetQueueOrderResult``, no pending job):
    over fair share, within quota and the zero-share penalty are judged on the queue's *current*
    allocation; only the dominant-resource share subtracts the victims taken and the next
    candidate (``after``); the share without them breaks ties."""
    now = qs.allocated
    over = all(now[r] > qs.fair_share[r] + EPS for r in RESOURCES)
    starved = all(qs.quota(r) < 0 or now[r] <= qs.quota(r) + EPS for r in RESOURCES)
    zero = any(allocatable_share(qs, r) == 0 and now[r] > EPS for r in RESOURCES)
    return (
        over,
        not starved,
        -qs.queue.priority,
        zero,
        _drf(qs, after, cap),
        _drf(qs, now, cap),
        qs.queue.created_index,
        qs.name,
    )


def victim_chunks(
    session: Session, candidates: Sequence[Job], core_protected: set[str]
) -> list[Contribution]:
    """The contributions of :func:`victim_stream`, job by job instead of in victim order.

    A job's own contributions do not depend on the other jobs (its surplus tasks one at a time,
    then its remaining gang unless core-protected), so this is the same multiset of steps."""
    out: list[Contribution] = []
    for job in candidates:
        rem = list(reversed(active_tasks(session, job)))
        while rem:
            extra = gang.surplus_task(job, rem)
            if extra is not None:
                out.append(Contribution(job, [extra]))
                rem = [t for t in rem if t.key != extra.key]
                continue
            if job.key not in core_protected:
                out.append(Contribution(job, list(rem)))
            break
    return out


def victim_stream(
    session: Session,
    candidates: Sequence[Job],
    core_protected: set[str],
    limit: int | None = None,
    memo: KeyMemo | None = None,
) -> list[Contribution]:
    """All contributions of the candidate jobs in victim order.

    Top-down, the queue that would sort last for allocation gives first (``_alloc_order_key``:
    its state as it is now, its DRF share after subtracting what it already gave and its next
    candidate). Inside a leaf queue: lowest
    priority, jobs above their minimum, newest first. A job gives one elastic surplus task at a
    time, and its whole remaining gang when it has no surplus (never for ``core_protected``).
    """
    return _VictimStream(session, candidates, core_protected, memo).take(limit)


class _VictimStream(QueueTree):
    """``victim_stream``'s state: each leaf's heap of candidate jobs, what each job and queue
    has given so far, and the memo of queue keys.

    The queues are KAI's victim queue, the same tree of heaps as its job queue
    (``actions/utils/action.go: newVictimsQueueFromCandidates`` builds a
    ``job_order_by_queue.go: JobsOrderByQueues`` with ``VictimQueue`` set), so its lazy re-order
    is ``QueueTree``'s: a pop marks the popped leaf and its ancestors, a marked queue is re-placed
    among its siblings only when the walk next looks at that heap (``getNextNode``: ``Fix(0)``),
    and until then its parent is compared at the level above through the child that was on top
    (``getBestJobFromNode`` peeks), with that child's popped entries and next one
    (``getVictimsForQueue``). Comparisons are reversed: the queue that would go last for
    allocation gives first (``buildNodeOrderFn(reverseOrder)``)."""

    def __init__(
        self, session: Session, candidates: Sequence[Job], core_protected: set[str], memo: KeyMemo | None
    ) -> None:
        super().__init__(session, session.capacity)
        self.core_protected = core_protected
        # Each job's rank by arrival tie-break and name, last first (the victim order's tie-break,
        # job_key reversed); two jobs of one name (in two queues) rank by key.
        by_name = sorted(candidates, key=lambda j: (j.arrival_tiebreak, j.name, j.key), reverse=True)
        self.names_desc = {j.key: i for i, j in enumerate(by_name)}
        self.remaining: dict[str, list[Task]] = {}
        self.heaps: dict[str, list[tuple[tuple[float, ...], str]]] = {}
        self.live: dict[str, int] = {}  # entries in the subtree of each queue (and ROOT)
        self.jobs = {j.key: j for j in candidates}
        # What each leaf's popped entries take off its share in KAI's victim order (``popped``).
        self.popped: dict[str, dict[str, float]] = {}
        # Queue keys by (queue, allocation now, allocation after): a key reads nothing else that
        # changes within a cycle (fair shares: by identity), so ``memo`` may serve every stream of
        # an action.
        self.key_memo: KeyMemo = {} if memo is None else memo
        # Each leaf's ``_leaf_request`` and each queue's key on it, kept until an entry leaves or
        # enters that leaf (the stream changes nothing else: no placement or allocation moves
        # while it is taken); a queue's key is kept with the request it was made on.
        self.leaf_requests: dict[str, tuple[dict[str, float], tuple[float, ...]]] = {}
        self.queue_keys: dict[str, tuple[dict[str, float], tuple[object, ...]]] = {}
        for job in candidates:
            tasks = list(reversed(active_tasks(session, job)))
            if not tasks:
                continue
            self.remaining[job.key] = tasks
            self._push(job)

    def _push(self, job: Job) -> None:
        """An entry for the job's remaining tasks, when they have a contribution to give (a
        core-protected job without surplus gives none, so it never comes to a leaf's top)."""
        if not self.next_contribution(job):
            return
        leaf = job.queue
        heapq.heappush(self.heaps.setdefault(leaf, []), (self.key(job), job.key))
        self.leaf_requests.pop(leaf, None)
        path = [qs.name for qs in self.session.ancestors(leaf)]
        entered = [q for q in path if not self.live.get(q)]
        for q in [*path, self.ROOT]:
            self.live[q] = self.live.get(q, 0) + 1
        self._linked(leaf, entered)

    def key(self, job: Job) -> tuple[float, ...]:
        rem = self.remaining[job.key]
        if job.subgroups:
            if not gang.meets_minimum(job, rem):
                state = 0
            else:
                state = 2 if gang.surplus_task(job, rem) is not None else 1
        else:
            n = len(rem)
            m = job.gang_min
            state = 0 if n < m else (1 if n == m else 2)
        return (job.priority, -state, job.created_s, self.names_desc[job.key])

    def alloc_after(self, qname: str, extra: dict[str, float]) -> dict[str, float]:
        qs = self.session.queues[qname]
        return {r: qs.allocated[r] - extra.get(r, 0.0) for r in RESOURCES}

    def listed_charge(self, leaf: str, job: Job) -> dict[str, float]:
        """What KAI's victim order takes off a queue's share for the leaf it compares through
        (``actions/utils/job_order_by_queue.go: getBestJobFromNode`` -> ``getVictimsForQueue``):
        every entry popped from that leaf so far plus its next one, each a whole job (or, for a
        job that gave part of itself, the clone of its remaining pods that
        ``pod_scenario_builder.go: addNextPotentialVictims`` pushed back), by its
        ``AllocatedVector``."""
        out = dict(self.popped.get(leaf, dict.fromkeys(RESOURCES, 0.0)))
        for r, v in self.entry_charge(job).items():
            out[r] += v
        return out

    def entry_charge(self, job: Job) -> dict[str, float]:
        """A victim entry's ``AllocatedVector``: the job's remaining pods in an allocated status
        (``podgroup_info/job_info.go: AddTaskInfo``, ``pod_status.AllocatedStatus``: Running,
        Allocated, Bound, Binding; not Pipelined, not Releasing). A task pipelined earlier in the
        cycle takes nothing off its queue's share, though the queue is charged for it (kai_diff
        seeds 83021, 86312)."""
        placements = self.session.placements
        return self.contribution_charge(
            [t for t in self.remaining[job.key] if placements[t.key].status in _ALLOCATED_STATUS]
        )

    def next_contribution(self, job: Job) -> list[Task]:
        rem = self.remaining[job.key]
        extra = gang.surplus_task(job, rem)
        if extra is not None:
            return [extra]
        if job.key in self.core_protected:
            return []
        return list(rem)

    def contribution_charge(self, tasks: list[Task]) -> dict[str, float]:
        """What the tasks take off their queue's share in the victim order: their charge, except
        that a GPU-memory task takes off no GPU. KAI subtracts the victims' allocated resource
        vectors (plugins/proportion/queue_order/queue_order.go,
        calculateDominantResourceShareWithJob: ``utils.QuantifyVector(victim.AllocatedVector)``),
        whose GPU entry is the pod's ``GpuRequirement.GPUs()``, the fraction or whole count only
        (api/resource_info/gpu_resource_requirment.go): a GPU-memory request counts 0 there,
        though the queue is charged its memory as a GPU fraction."""
        out = dict.fromkeys(RESOURCES, 0.0)
        for t in tasks:
            memory_only = t.gpu == 0 and t.gpu_memory_mib > 0
            for r, v in _charge(self.session, t).items():
                if not (memory_only and r == "gpu"):
                    out[r] += v
        return out

    def order_key(self, qname: str, extra: dict[str, float]) -> tuple[object, ...]:
        qs = self.session.queues[qname]
        after = self.alloc_after(qname, extra)
        mk = (qname, tuple(qs.allocated.values()), tuple(after[r] for r in RESOURCES))
        hit = self.key_memo.get(mk)
        if hit is not None and hit[0] is qs.fair_share:
            return hit[1]
        k = _alloc_order_key(qs, after, self.session.capacity)
        self.key_memo[mk] = (qs.fair_share, k)
        return k

    # QueueTree's leaves: a leaf's entries are its heap; its request is what its comparison
    # takes off the share (``listed_charge``), and a queue's key is its allocation-order key.
    def _alive(self, queue: str) -> bool:
        return self.live.get(queue, 0) > 0

    def _leaf_request(self, leaf: str) -> tuple[dict[str, float], tuple[float, ...]]:
        hit = self.leaf_requests.get(leaf)
        if hit is None:
            charge = self.listed_charge(leaf, self.jobs[self.heaps[leaf][0][1]])
            hit = self.leaf_requests[leaf] = (charge, tuple(charge[r] for r in RESOURCES))
        return hit

    def _queue_key(self, queue: str, req: dict[str, float], shape: tuple[float, ...]) -> tuple[object, ...]:
        hit = self.queue_keys.get(queue)
        if hit is not None and hit[0] is req:
            return hit[1]
        key = self.order_key(queue, req)
        self.queue_keys[queue] = (req, key)
        return key

    def _first(self, ka: tuple[object, ...], kb: tuple[object, ...], a: str, b: str) -> bool:
        """The child that gives first: the larger allocation-order key (the key ends in the
        queue's creation index and name, so two children never tie)."""
        return ka > kb

    def take(self, limit: int | None) -> list[Contribution]:
        """The contributions in victim order, at most ``limit`` of them."""
        out: list[Contribution] = []
        while limit is None or len(out) < limit:
            leaf = self._walk()
            if leaf is None:
                break
            job = self.jobs[self.heaps[leaf][0][1]]
            tasks = self.next_contribution(job)
            out.append(Contribution(job, tasks))
            # KAI pops the whole entry (the job, or the clone of its remaining pods) and pushes
            # what it did not take back as a new entry (``addNextPotentialVictims``), after the
            # pop has marked (or, for an emptied leaf, unlinked) its path (``PopNextJob``).
            charge = self.entry_charge(job)
            popped = self.popped.setdefault(leaf, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                popped[r] += charge[r]
            heapq.heappop(self.heaps[leaf])
            self.leaf_requests.pop(leaf, None)
            for qs in self.session.ancestors(leaf):
                self.live[qs.name] -= 1
            self.live[self.ROOT] -= 1
            self._popped(leaf)
            rem = self.remaining[job.key]
            gone = {t.key for t in tasks}
            rem[:] = [t for t in rem if t.key not in gone]
            if rem:
                self._push(job)
        return out
