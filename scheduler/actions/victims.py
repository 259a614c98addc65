"""Victim search shared by consolidation, reclaim and preempt (kai-semantics.md §3.9, §4.4).

A preemptor job's next step (its missing gang members, or one elastic extra) is placed by
virtually evicting victims, re-placing whatever of them still fits elsewhere, and placing the
preemptor (pipelined) in normal job order. Two generators propose victim sets:

* a node-local greedy one: task by task, the node that needs the fewest victim tasks to take it
  (this is what keeps large gangs cheap: whole nodes of small jobs are emptied one by one);
* KAI's growing prefix of the victim stream (victim order), each prefix first screened by
  a cheap capacity count and only then simulated.

The prefix answer wins unless the greedy one evicts strictly fewer tasks. Impossibility is
proved up front from capacity and (for reclaim) from how much each victim queue may lose.
Every action's search is bounded by a work budget (``Config.action_work_budget``), so the
answer does not depend on the machine's speed; a wall-clock limit (``Config.action_time_budget_s``)
is a fault stop only, counted when hit.
"""

from __future__ import annotations

import bisect
import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from typing import Literal

from scheduler import gang, reasons, rules
from scheduler.actions.allocate import capacity_error, eligible, place_task, step_request
from scheduler.actions.victim_sums import need_gpu
from scheduler.model import RESOURCES, Job, Task, TaskState, clean
from scheduler.ordering import JobQueue, allocatable_share, job_key, job_request, queue_key
from scheduler.placement import AMOUNT_EPS, best_fit, node_fit
from scheduler.result import Eviction
from scheduler.session import EPS, NodeState, QueueState, Session, Statement
from scheduler.topology import node_sets

ACTIVE = gang.ACTIVE_ALLOCATED


# Queue keys by (queue, its allocation, a request or an allocation after), with the fair-share
# dict they were computed for (a key reads nothing else that changes within a cycle).
KeyMemo = dict[tuple[str, tuple[float, ...], tuple[float, ...]], tuple[object, tuple[object, ...]]]


@dataclass
class Contribution:
    """What one victim job gives in one step of the victim stream."""

    job: Job
    tasks: list[Task]


@dataclass
class Outcome:
    """A simulated scenario that worked."""

    victims: list[Task]  # evicted and not re-placed
    moved: list[Task]  # evicted and re-placed elsewhere (Pipelined there)
    contributions: list[Contribution] = field(default_factory=list)
    origin: dict[str, str | None] = field(default_factory=dict)  # task -> node it ran on


def now_s() -> float:
    return time.monotonic()


# Work units of the steps that place a task or order a victim contribution, relative to reading
# one job or node (1 unit): measured on the mixed-stress workload, both take about 50 times longer.
PLACE_UNITS = 50


def spend(session: Session, units: int) -> None:
    """Charge work to the running action's budget (``Config.action_work_budget``), in units
    proportional to the time the step takes: a job screened (1, and 1 per job its victim list
    scans), a capacity count (1 per node it reads), a victim stream (``PLACE_UNITS`` per
    contribution), a simulated scenario and a greedy step (``PLACE_UNITS`` per task placed or
    evicted)."""
    session.work_left -= units


def out_of_time(session: Session) -> bool:
    """Whether the running eviction action must stop now.

    The search is bounded by work (``Config.action_work_budget``), which makes the answer the
    same on a fast and a slow machine; the wall-clock limit (``Config.action_time_budget_s``)
    is only a fault stop, and a cycle that hits it says so (``actions_out_of_time``)."""
    if session.work_left <= 0 and session.config.action_work_budget > 0:
        session.out_of_work.add(session.action)
        return True
    if session.deadline is None or now_s() <= session.deadline:
        return False
    session.out_of_time.add(session.action)
    return True


# ---- victim order (§4.4) ---------------------------------------------------------------------


def active_tasks(session: Session, job: Job) -> list[Task]:
    return [t for t in job.tasks if gang.status(session, t) in ACTIVE]


def _charge(session: Session, task: Task) -> dict[str, float]:
    return session.placements[task.name].charge


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
                rem = [t for t in rem if t.name != extra.name]
                continue
            if job.name not in core_protected:
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
    names_desc = {n: i for i, n in enumerate(sorted((j.name for j in candidates), reverse=True))}
    remaining: dict[str, list[Task]] = {}
    heaps: dict[str, list[tuple[tuple[float, ...], str]]] = {}
    jobs = {j.name: j for j in candidates}

    def key(job: Job) -> tuple[float, ...]:
        rem = remaining[job.name]
        if job.subgroups:
            if not gang.meets_minimum(job, rem):
                state = 0
            else:
                state = 2 if gang.surplus_task(job, rem) is not None else 1
        else:
            n = len(rem)
            m = job.gang_min
            state = 0 if n < m else (1 if n == m else 2)
        return (job.priority, -state, job.created_s, names_desc[job.name])

    for job in candidates:
        tasks = list(reversed(active_tasks(session, job)))
        if not tasks:
            continue
        remaining[job.name] = tasks
        heapq.heappush(heaps.setdefault(job.queue, []), (key(job), job.name))
    taken: dict[str, dict[str, float]] = {}

    def alloc_after(qname: str, extra: dict[str, float]) -> dict[str, float]:
        qs = session.queues[qname]
        t = taken.get(qname, {})
        return {r: qs.allocated[r] - t.get(r, 0.0) - extra.get(r, 0.0) for r in RESOURCES}

    def next_contribution(job: Job) -> list[Task]:
        rem = remaining[job.name]
        extra = gang.surplus_task(job, rem)
        if extra is not None:
            return [extra]
        if job.name in core_protected:
            return []
        return list(rem)

    def contribution_charge(tasks: list[Task]) -> dict[str, float]:
        out = dict.fromkeys(RESOURCES, 0.0)
        for t in tasks:
            for r, v in _charge(session, t).items():
                out[r] += v
        return out

    # Queue keys by (queue, allocation now, allocation after): a key reads nothing else that
    # changes within a cycle (fair shares: by identity), so ``memo`` may serve every stream of
    # an action.
    key_memo: KeyMemo = {} if memo is None else memo

    def order_key(qname: str, extra: dict[str, float]) -> tuple[object, ...]:
        qs = session.queues[qname]
        after = alloc_after(qname, extra)
        mk = (qname, tuple(qs.allocated.values()), tuple(after[r] for r in RESOURCES))
        hit = key_memo.get(mk)
        if hit is not None and hit[0] is qs.fair_share:
            return hit[1]
        k = _alloc_order_key(qs, after, session.capacity)
        key_memo[mk] = (qs.fair_share, k)
        return k

    # Each subtree's best leaf, dropped along the path of the leaf that gives (nothing else changes).
    leaf_memo: dict[str, tuple[str, Job] | None] = {}

    def best_leaf(qname: str) -> tuple[str, Job] | None:
        if qname in leaf_memo:
            return leaf_memo[qname]
        found = _best_leaf(qname)
        leaf_memo[qname] = found
        return found

    def _best_leaf(qname: str) -> tuple[str, Job] | None:
        qs = session.queues[qname]
        if qs.is_leaf:
            heap = heaps.get(qname)
            while heap:
                job = jobs[heap[0][1]]
                if next_contribution(job):
                    return qname, job
                heapq.heappop(heap)
            return None
        return pick(qs.children)

    def pick(queues: list[str]) -> tuple[str, Job] | None:
        """The best leaf below ``queues``: the one whose queue gives first. Keys are needed only
        to compare, so a single queue with candidates gives without one."""
        cands = [(q, c) for q in queues if (c := best_leaf(q)) is not None]
        if len(cands) <= 1:
            return cands[0][1] if cands else None
        best: tuple[tuple[object, ...], tuple[str, Job]] | None = None
        for q, cand in cands:
            extra = contribution_charge(next_contribution(cand[1]))
            k = order_key(q, extra)
            if best is None or k > best[0]:
                best = (k, cand)
        assert best is not None
        return best[1]

    tops = [
        q for q, qs in session.queues.items() if not qs.queue.parent or qs.queue.parent not in session.queues
    ]
    out: list[Contribution] = []
    while limit is None or len(out) < limit:
        found = pick(tops)
        if found is None:
            break
        leaf, job = found
        tasks = next_contribution(job)
        out.append(Contribution(job, tasks))
        charge = contribution_charge(tasks)
        for qs in session.ancestors(leaf):
            leaf_memo.pop(qs.name, None)
            t = taken.setdefault(qs.name, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                t[r] += charge[r]
        rem = remaining[job.name]
        gone = {t.name for t in tasks}
        rem[:] = [t for t in rem if t.name not in gone]
        heap = heaps[leaf]
        heapq.heappop(heap)
        if rem:
            heapq.heappush(heap, (key(job), job.name))
    return out


# ---- cheap capacity screening ---------------------------------------------------------------


class FreeTracker:
    """Free capacity on the nodes the preemptor may use, as victims are added virtually.

    ``ok()`` is a necessary condition for the preemptor's tasks to fit: enough GPUs, CPU and
    memory in total, and for every whole-GPU size g enough nodes-slots of g free devices.
    """

    def __init__(self, session: Session, nodes: Sequence[NodeState], tasks: Sequence[Task]) -> None:
        self.session = session
        self.nodes = {ns.name: ns for ns in nodes}
        self.active: dict[str, list[float]] = {}
        self.need_gpu = need_gpu(session, tasks)
        self.need_cpu = sum(t.cpu_millis for t in tasks)
        self.need_mem = sum(t.memory_mib for t in tasks)
        self.need_pods = len(tasks)
        self.sizes = sorted({t.whole_gpus for t in tasks if t.whole_gpus})
        self.count_at_least = {g: sum(1 for t in tasks if t.whole_gpus >= g) for g in self.sizes}
        self.free_gpu = 0.0
        self.free_cpu = 0.0
        self.free_mem = 0.0
        self.free_pods = 0.0
        self.free_dev: dict[str, int] = {}
        self.slots = dict.fromkeys(self.sizes, 0)
        for ns in nodes:
            free = 0
            for d in ns.devices:
                self.free_gpu += max(0.0, d.memory - d.active) / d.memory if d.memory > 0 else 0.0
                free += 1 if d.is_free else 0
            self.free_dev[ns.name] = free
            for g in self.sizes:
                self.slots[g] += free // g
            self.free_cpu += ns.cpu_idle + ns.cpu_rel
            self.free_mem += ns.mem_idle + ns.mem_rel
            self.free_pods += ns.pods_idle + ns.pods_rel

    def add(self, task: Task) -> None:
        p = self.session.placements[task.name]
        if p.node not in self.nodes or p.status not in ACTIVE:
            return
        ns = self.nodes[p.node]
        self.free_cpu += task.cpu_millis
        self.free_mem += task.memory_mib
        self.free_pods += 1
        act = self.active.get(ns.name)
        if act is None:
            act = [d.active for d in ns.devices]
            self.active[ns.name] = act
        changed = False
        for i in p.devices:
            d = ns.devices[i]
            amount = p.gpu_memory if task.is_fractional else d.memory
            was_free = act[i] <= EPS
            act[i] = max(0.0, act[i] - amount)
            self.free_gpu += amount / d.memory if d.memory > 0 else 0.0
            if not was_free and act[i] <= EPS:
                changed = True
                old = self.free_dev[ns.name]
                self.free_dev[ns.name] = old + 1
                for g in self.sizes:
                    self.slots[g] += (old + 1) // g - old // g
        del changed

    def ok(self) -> bool:
        if self.free_gpu + EPS < self.need_gpu or self.free_pods < self.need_pods:
            return False
        if self.free_cpu + AMOUNT_EPS < self.need_cpu or self.free_mem + AMOUNT_EPS < self.need_mem:
            return False
        return all(self.slots[g] >= self.count_at_least[g] for g in self.sizes)


def usable_nodes(session: Session, job: Job) -> list[NodeState]:
    """Nodes the job's pods may ever use: schedulable, tolerated, matching selector and affinity."""
    return [
        ns for ns in session.nodes.values() if ns.schedulable and rules.static_reason(ns.node, job) is None
    ]


# ---- simulation (§3.9) ---------------------------------------------------------------------


@dataclass
class SolveLog:
    """How a search went: ``late`` when some scenario got past the preemptor's placement (its
    answer then depends on the jobs allocate would pop after the preemptor); ``last`` unset when
    some scenario came to the preemptor's turn with a victim job still to come after it in
    allocate order (see ``_carries``)."""

    late: bool = False
    last: bool = True


def _path(session: Session, queue: str) -> list[QueueState]:
    return list(reversed(session.ancestors(queue)))


def _request_of(session: Session, tasks: Sequence[Task]) -> dict[str, float]:
    total = dict.fromkeys(RESOURCES, 0.0)
    for t in tasks:
        for r, v in session.pending_request(t).items():
            total[r] = clean(total[r] + v)
    return total


OrderKeys = dict[str, tuple[list[QueueState], list[tuple[object, ...]], tuple[object, ...]]]


def _order_keys(session: Session, entries: list[tuple[Job, list[Task]]]) -> OrderKeys:
    """Queue keys along each job's path and its job key, taken once per job in the state before
    the scenario's virtual evictions (consolidation: a victim's queue keeps what it holds, since
    every victim must be re-placed), each queue keyed with the job's own request."""
    keys: OrderKeys = {}
    paths: dict[str, list[QueueState]] = {}
    cache: dict[tuple[str, tuple[float, ...]], tuple[object, ...]] = {}
    for job, tasks in entries:
        path = paths.get(job.queue)
        if path is None:
            path = paths[job.queue] = _path(session, job.queue)
        req = _request_of(session, tasks)
        shape = tuple(req[r] for r in RESOURCES)
        qkeys = []
        for q in path:
            k = cache.get((q.name, shape))
            if k is None:
                k = cache[(q.name, shape)] = queue_key(q, req, session.capacity)
            qkeys.append(k)
        keys[job.name] = (path, qkeys, job_key(session, job))
    return keys


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
        self.by_leaf.setdefault(job.queue, []).append((job_key(self.session, job), job.name))

    def freeze(self) -> None:
        for lst in self.by_leaf.values():
            lst.sort()

    def request(self, job: Job) -> dict[str, float]:
        req = self.requests.get(job.name)
        if req is None:
            req = self.requests[job.name] = job_request(self.session, job)
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
        self.in_sim = {j.name for j, _ in entries}
        self.sim: dict[str, list[tuple[tuple[object, ...], int, tuple[Job, list[Task]]]]] = {}
        for i, e in enumerate(entries):
            self.sim.setdefault(e[0].queue, []).append((job_key(session, e[0]), i, e))
        for lst in self.sim.values():
            lst.sort(key=lambda x: (x[0], x[1]), reverse=True)  # type: ignore[arg-type,return-value]
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
        if other is not None and other[0] < key:  # type: ignore[operator]
            assert self.heads is not None
            return self.heads.request(other[1]), True
        return _request_of(self.session, tasks), False

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


def _order_jobs(
    session: Session, entries: list[tuple[Job, list[Task]]], keys: OrderKeys
) -> list[tuple[Job, list[Task]]]:
    """Normal job order (§4.1, §4.2) of the preemptor and the victim jobs, by ``_order_keys``."""

    def cmp(a: tuple[Job, list[Task]], b: tuple[Job, list[Task]]) -> int:
        pa, ka, ja = keys[a[0].name]
        pb, kb, jb = keys[b[0].name]
        for i in range(min(len(pa), len(pb))):
            if pa[i].name != pb[i].name:
                if ka[i] != kb[i]:
                    return -1 if ka[i] < kb[i] else 1  # type: ignore[operator]
                ta = (pa[i].queue.created_index, pa[i].name)
                tb = (pb[i].queue.created_index, pb[i].name)
                return -1 if ta < tb else 1
        if ja != jb:
            return -1 if ja < jb else 1  # type: ignore[operator]
        return 0

    # Each leaf queue is represented by its best job (job order); the best head goes next.
    per_leaf: dict[str, list[tuple[Job, list[Task]]]] = {}
    for e in entries:
        per_leaf.setdefault(e[0].queue, []).append(e)
    for lst in per_leaf.values():
        lst.sort(key=lambda e: keys[e[0].name][2], reverse=True)  # type: ignore[arg-type,return-value]
    out: list[tuple[Job, list[Task]]] = []
    while per_leaf:
        best: tuple[Job, list[Task]] | None = None
        for lst in per_leaf.values():
            if best is None or cmp(lst[-1], best) < 0:
                best = lst[-1]
        assert best is not None
        out.append(best)
        lst = per_leaf[best[0].queue]
        lst.pop()
        if not lst:
            del per_leaf[best[0].queue]
    return out


def _max_free(session: Session) -> tuple[int, float, float, float, float]:
    """Upper bounds over nodes of free whole GPUs, free fractional memory, CPU, memory, pods."""
    g = 0
    frac = 0.0
    cpu = mem = pods = 0.0
    for ns in session.nodes.values():
        if not ns.schedulable:
            continue
        g = max(g, ns.free_whole_gpus())
        for d in ns.devices:
            frac = max(frac, d.memory - d.active)
        cpu = max(cpu, ns.cpu_idle + ns.cpu_rel)
        mem = max(mem, ns.mem_idle + ns.mem_rel)
        pods = max(pods, ns.pods_idle + ns.pods_rel)
    return g, frac, cpu, mem, pods


def _replace_victims(
    session: Session, stmt: Statement, job: Job, tasks: list[Task], bound: list[float]
) -> None:
    """Re-place evicted tasks of one victim job (pipeline-only); a task whose best node is the one
    it ran on is simply un-evicted. A gang that cannot reach its minimum stays evicted.

    ``bound`` is ``_max_free`` taken at some point since the last time room was freed, or empty
    until a task needs it: re-placing only takes room, so a later reading is as valid a screen
    (a task it skips would fit nowhere) and most victims, un-evicted, never need one."""
    cp = stmt.checkpoint()
    nodes = list(session.nodes.values())
    for t in tasks:
        if capacity_error(session, job, step_request(session, [t])):
            continue  # its queue's room went to the preemptor (a limit, non-preemptible quota)
        if stmt.unevict(t):  # §3.9: a task whose own room is still free is simply un-evicted
            continue
        if not bound:
            bound[:] = _max_free(session)
        if (
            t.whole_gpus > bound[0]
            or t.cpu_millis > bound[2] + AMOUNT_EPS
            or t.memory_mib > bound[3] + AMOUNT_EPS
            or bound[4] < 1
        ):
            continue
        if (
            t.is_fractional
            and session.device_need(t, session.max_device_memory) > bound[1] + EPS
            and t.gpu > 0
        ):
            continue
        found = best_fit(session, t, job, nodes)
        if found is None:
            bound[:] = _max_free(session)  # tighten the screen for the victims that follow
            continue
        ns, fit = found
        # Its own room is taken (``room_left`` was False above), even when the best node is the
        # one it ran on: it is pipelined onto the devices found, never put back on its own.
        stmt.place(t, ns.name, fit.devices, pipelined=True)
    if not gang.gang_satisfied(session, job) and stmt.checkpoint() > cp:
        stmt.rollback(cp)
        bound.clear()  # room freed again: read it when a task next needs it


def _place_preemptor(session: Session, stmt: Statement, job: Job, tasks: list[Task]) -> bool:
    nodes = list(session.nodes.values())
    sets = node_sets(session, job, tasks, nodes)
    for node_set in sets:
        cp = stmt.checkpoint()
        ok = True
        for t in tasks:
            if (
                place_task(session, stmt, job, t, node_set.nodes, pipeline_only=True, extra=node_set.scores)
                is not None
            ):
                ok = False
                break
        if ok:
            return True
        stmt.rollback(cp)
    return False


def simulate(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    contributions: Sequence[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None = None,
    moves_only: bool = False,
    log: SolveLog | None = None,
) -> Outcome | None:
    """Evict the scenario's victims, then place preemptor and re-place victims in job order.
    On failure everything is rolled back; on success the changes stay in ``stmt``.

    Reclaim and preempt order the jobs as the next allocate would pop them (``AllocateOrder``:
    queues keyed on the current state, after the virtual evictions and every re-placement, each
    represented by its best pending job), so a victim whose queue allocate would serve before the
    preemptor's takes its room back and the scenario fails - no reclaim that the next cycle would
    undo. Consolidation (``moves_only``: every victim must be re-placed, no queue loses anything)
    keys the queues as they stand, each by the job itself: the pending job places before the
    jobs it moves."""
    cp = stmt.checkpoint()
    victims = [t for c in contributions for t in c.tasks]
    spend(session, PLACE_UNITS * (len(tasks) + len(victims)))
    origin = {t.name: session.placements[t.name].node for t in victims}
    by_job: dict[str, tuple[Job, list[Task]]] = {}
    for c in contributions:
        by_job.setdefault(c.job.name, (c.job, []))[1].extend(c.tasks)
    entries = [(job, tasks)] + list(by_job.values())
    order: Iterator[tuple[Job, list[Task]]] | None = None
    if moves_only:
        order = iter(_order_jobs(session, entries, _order_keys(session, entries)))
    for t in victims:
        stmt.evict(t)
    if order is None:
        # job keys too after the evictions: a victim that lost its gang is below its minimum
        order = iter(AllocateOrder(session, entries, heads).pop, None)
    request = step_request(session, tasks)  # a function of the tasks alone: read once
    if capacity_error(session, job, request):
        stmt.rollback(cp)
        return None
    bound: list[float] = []  # ``_max_free``, read when a victim first needs it
    popped = 0  # victim jobs re-placed (or left evicted) before the preemptor's turn
    for j, ts in order:
        if j is job:
            if log is not None and popped < len(entries) - 1:
                log.last = False
            # again here: victims of its own queues re-placed before it may have used the room
            if capacity_error(session, job, request) or not _place_preemptor(session, stmt, job, tasks):
                stmt.rollback(cp)
                return None
            bound.clear()
        else:
            popped += 1
            _replace_victims(session, stmt, j, sorted(ts, key=lambda t: j.tasks.index(t)), bound)
    if log is not None:
        log.late = True  # whatever fails from here on was judged after the preemptor's placement
    real: list[Task] = []
    moved: list[Task] = []
    for t in victims:
        p = session.placements[t.name]
        if p.status in (TaskState.RELEASING, TaskState.PENDING):
            real.append(t)
        elif p.node != origin[t.name] or p.status == TaskState.PIPELINED:
            moved.append(t)
    outcome = Outcome(real, moved, list(contributions), origin)
    if (
        not real
        and not moved
        and not any(session.placements[t.name].status == TaskState.PIPELINED for t in tasks)
    ):
        stmt.rollback(cp)
        return None
    if not validate(outcome):
        stmt.rollback(cp)
        return None
    return outcome


# ---- generators ---------------------------------------------------------------------------


def greedy_scenario(
    session: Session, stmt: Statement, job: Job, tasks: list[Task], stream: list[Contribution]
) -> list[Contribution] | None:
    """Node-local greedy: for each preemptor task the usable node that needs the fewest victim
    tasks (victims on a node taken in victim order; ties by node name). Leaves ``stmt`` as found."""
    nodes = usable_nodes(session, job)
    if not nodes:
        return None
    on_node: dict[str, list[int]] = {}
    for i, c in enumerate(stream):
        seen: set[str] = set()
        for t in c.tasks:
            n = session.placements[t.name].node
            if n and n not in seen:
                seen.add(n)
                on_node.setdefault(n, []).append(i)
    cp = stmt.checkpoint()
    chosen: set[int] = set()
    index = {ns.name: i for i, ns in enumerate(nodes)}
    # Per task shape: the nodes' costs computed so far in a heap keyed (victim tasks, node order),
    # nodes computed in node order up to ``scanned``. A node whose state changed is recomputed
    # when its shape is next needed; entries of an older computation are skipped (``version``).
    # The best node is then the first in node order among those needing the fewest victim
    # tasks - as a scan of every node would find it - without re-reading every node per task.
    ranks: dict[tuple[float, ...], _Ranks] = {}

    def shape(t: Task) -> tuple[float, ...]:
        return (t.gpu, t.gpu_memory_mib, t.cpu_millis, t.memory_mib)

    def cost(ns: NodeState, t: Task) -> tuple[int, list[int]] | None:
        if node_fit(session, ns, t, job).ok:
            return (0, [])
        res: tuple[int, list[int]] | None = None
        sub = stmt.checkpoint()
        n = 0
        picked: list[int] = []
        for i in on_node.get(ns.name, []):
            if i in chosen:
                continue
            for v in stream[i].tasks:
                stmt.evict(v)
            n += len(stream[i].tasks)
            picked.append(i)
            if node_fit(session, ns, t, job).ok:
                res = (n, picked)
                break
        stmt.rollback(sub)
        return res

    def push(r: _Ranks, ns: NodeState, t: Task) -> None:
        found = cost(ns, t)
        if found is not None:
            heapq.heappush(r.heap, (found[0], index[ns.name], r.version.get(ns.name, 0), found[1]))

    def best_for(t: Task) -> tuple[int, str, list[int]] | None:
        r = ranks.get(shape(t))
        if r is None:
            r = ranks[shape(t)] = _Ranks()
        for name in sorted(r.stale, key=index.__getitem__):
            push(r, session.nodes[name], t)
        r.stale.clear()
        while True:
            while r.heap and r.heap[0][2] != r.version.get(nodes[r.heap[0][1]].name, 0):
                heapq.heappop(r.heap)
            if r.heap and r.heap[0][0] == 0:
                break  # nothing beats a node that needs no victim; later nodes come after it
            if r.scanned == len(nodes):
                break
            push(r, nodes[r.scanned], t)
            r.scanned += 1
        if not r.heap:
            return None
        top = r.heap[0]
        return top[0], nodes[top[1]].name, top[3]

    try:
        for t in tasks:
            if out_of_time(session):
                return None
            spend(session, PLACE_UNITS)
            best = best_for(t)
            if best is None:
                return None
            dirty = {best[1]}
            for i in best[2]:
                chosen.add(i)
                for v in stream[i].tasks:
                    dirty.add(session.placements[v.name].node or "")
                    stmt.evict(v)
            ns = session.nodes[best[1]]
            fit = node_fit(session, ns, t, job)
            if not fit.ok:
                return None
            stmt.place(t, ns.name, fit.devices, pipelined=True)
            for r in ranks.values():
                for name in dirty:
                    pos = index.get(name)
                    if pos is not None and pos < r.scanned:
                        r.version[name] = r.version.get(name, 0) + 1
                        r.stale.add(name)
        return [stream[i] for i in sorted(chosen)]
    finally:
        stmt.rollback(cp)


@dataclass
class _Ranks:
    """``greedy_scenario``'s node costs for one task shape."""

    heap: list[tuple[int, int, int, list[int]]] = field(default_factory=list)
    scanned: int = 0
    version: dict[str, int] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)


def solve(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None = None,
    moves_only: bool = False,
    log: SolveLog | None = None,
) -> Outcome | None:
    """Find the victims for the preemptor's step: fewest tasks, KAI's victim order on ties."""
    nodes = usable_nodes(session, job)
    tracker = FreeTracker(session, nodes, tasks)
    spend(session, len(nodes))
    # ``ok()`` only grows with the prefix: every prefix from ``lo`` on passes the capacity screen.
    lo = 0
    while not tracker.ok():
        if lo == len(stream):
            return None  # even every candidate victim would not make room
        for t in stream[lo].tasks:
            tracker.add(t)
        lo += 1
    lo = max(lo, 1)
    greedy = (
        greedy_scenario(session, stmt, job, tasks, stream) if len(tasks) > 1 or len(stream) > 32 else None
    )
    bound = sum(len(c.tasks) for c in greedy) if greedy is not None else None
    # Prefixes of at most ``bound`` tasks come before the greedy set, longer ones after it.
    mid = lo - 1
    n = sum(len(c.tasks) for c in stream[:mid])
    while mid < len(stream) and (bound is None or n + len(stream[mid].tasks) <= bound):
        n += len(stream[mid].tasks)
        mid += 1
    found = _shortest_prefix(session, stmt, job, tasks, stream, validate, heads, moves_only, lo, mid, log)
    if found is not None or out_of_time(session):
        return found
    if greedy is not None:
        out = simulate(session, stmt, job, tasks, greedy, validate, heads, moves_only, log)
        if out is not None:
            return out
    return _shortest_prefix(
        session, stmt, job, tasks, stream, validate, heads, moves_only, mid + 1, len(stream), log
    )


def _shortest_prefix(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None,
    moves_only: bool,
    lo: int,
    hi: int,
    log: SolveLog | None = None,
) -> Outcome | None:
    """The shortest prefix ``stream[:k]``, ``lo <= k <= hi``, whose scenario works (§3.9).

    Prefix lengths are probed growing exponentially (lo, lo+1, lo+3, lo+7, ..., hi); after the
    first success the shortest working prefix is binary-searched between the last failure and it,
    as KAI solves large gangs progressively. O(log n) simulations instead of one per prefix.

    Monotonicity assumption: a prefix that fails means every shorter prefix fails too (fewer
    victims free less room). It is not exact - validators (a victim queue kept above its share)
    and the allocate order (a victim queue that lost more sorts earlier and takes its room back)
    can make a longer prefix fail where a shorter one works - so a working prefix that lies
    between two failing probes can be missed; then the action tries again next cycle."""
    if lo > hi:
        return None
    cp = stmt.checkpoint()

    def attempt(k: int) -> Outcome | None:
        return simulate(session, stmt, job, tasks, stream[:k], validate, heads, moves_only, log)

    last_fail = lo - 1
    step = 1
    k = lo
    while True:
        if out_of_time(session):
            return None
        out = attempt(k)
        if out is not None:
            break
        if k == hi:
            return None
        last_fail = k
        k = min(hi, lo + 2 * step - 1)
        step *= 2
    # stream[:k] works (its changes are in ``stmt``), stream[:last_fail] does not.
    best, best_out = k, out
    held = True
    a = last_fail + 1
    while a < best:
        if out_of_time(session):
            break
        m = (a + best) // 2
        if held:
            stmt.rollback(cp)
            held = False
        out = attempt(m)
        if out is not None:
            best, best_out, held = m, out, True
        else:
            a = m + 1
    if held:
        return best_out
    stmt.rollback(cp)
    return attempt(best)


# ---- the action loop ------------------------------------------------------------------------


Note = tuple[str, str]  # (reason, message) explaining why an action could not help a job

# Screen every job before ordering any (tests switch it off to compare with the ordered loop).
SCREEN_FIRST = True


def run_action(
    session: Session,
    action: str,
    preemptor_ok: Callable[[Job, list[Task]], bool | Note],
    candidates: Callable[[Job, list[Task]], tuple[list[Job], set[str]]],
    make_validator: Callable[[Job, list[Task]], Callable[[Outcome], bool]],
    describe: Callable[[Job, Task, Outcome], tuple[str, str]],
    max_gain: Callable[[Job, list[Task], list[Contribution]], float] | None = None,
    explain: Callable[[Job, str], Note | None] | None = None,
    moves_only: bool = False,
    quick_screen: Callable[[Job, list[Task]], str | None] | None = None,
) -> None:
    """Pop eligible pending jobs in job order and try to make room for each one.

    ``preemptor_ok`` returns True to go on, False to skip the job silently (the action does not
    apply to it) or a note saying why the action cannot help it. ``max_gain`` bounds the GPUs the
    victims may give at most (e.g. reclaim's quota rules); when free GPUs plus that bound cannot
    cover the job, no victim set is ever tried. ``explain(job, "no_victims" | "no_scenario")``
    words the note of a job the action tried and failed; notes are kept in
    ``session.action_notes`` (dropped again when a later action helps the job).
    ``quick_screen`` may give the screen's "no_victims" / "no_scenario" verdict before the
    victims are listed; it must give it exactly when the screen would, or None."""

    session.deadline = now_s() + max(0.0, session.config.action_time_budget_s)
    session.work_left = session.config.action_work_budget
    session.action = action
    heads = None if moves_only else PendingHeads(session)
    waiting: list[Job] = []
    for candidate in session.pending_jobs():
        if not eligible(session, candidate):
            continue
        if heads is not None:
            heads.add(candidate)
        if within_preemption_delay(session, candidate):
            add_note(session, candidate, preemption_delay_note(session, candidate))
            continue
        waiting.append(candidate)
    if heads is not None:
        heads.freeze()

    # Failed jobs by ``_alike`` signature since the last commit (a failed search rolls back, so
    # until a commit the session is as it was): the note kind, the job, and how the failure
    # carries over to an alike job (``_carries``).
    failed: dict[tuple[object, ...], tuple[str, Job, Carry]] = {}
    # KAI's scheduling signatures: the smallest job whose victim search failed, per leaf queue
    # (reclaim, preempt) or for the whole action (consolidation) and constraint signature; kept
    # for the whole action, commits included (``Representatives``).
    representatives = Representatives(per_queue=not moves_only) if SIGNATURES else None
    stream_keys: KeyMemo = {}  # victim order keys of every stream this action builds

    def note_of(job: Job, kind: str) -> Note | None:
        return explain(job, kind) if explain is not None else None

    def screen(job: Job, in_order: bool) -> tuple[Note | None, Search | None]:
        """Everything before the search, which changes nothing: (a note or None, None) for a
        job the action cannot help, (None, the search's inputs) for one it must search for.
        ``in_order``: jobs come in job order (a failed search may carry over)."""
        tasks = gang.step_tasks(session, job)
        if not tasks:
            return None, None
        ok = preemptor_ok(job, tasks)
        if ok is not True:
            return (ok if ok is not False else None), None
        sig = _alike(session, job, tasks) if heads is not None else None
        hit = failed.get(sig) if sig is not None else None
        if hit is not None and heads is not None and _carries(session, heads, hit[2], hit[1], job, in_order):
            failed[sig] = (hit[0], job, hit[2])  # type: ignore[index]
            return note_of(job, hit[0]), None
        kind = quick_screen(job, tasks) if quick_screen is not None else None
        if kind is not None:
            if sig is not None:
                failed[sig] = (kind, job, "any")
            return note_of(job, kind), None
        victims, core_protected = candidates(job, tasks)
        spend(session, 1)
        if max_gain is not None:
            # The bound needs only what the victims give, not in which order: screen with the
            # unordered contributions and order them only for a job that passes.
            chunks = victim_chunks(session, victims, core_protected) if victims else []
            if not chunks:
                kind = "no_victims"
            else:
                tracker = FreeTracker(session, usable_nodes(session, job), tasks)
                spend(session, len(tracker.nodes))
                if tracker.free_gpu + max_gain(job, tasks, chunks) + EPS < tracker.need_gpu:
                    kind = "no_scenario"
        if kind is None and not victims:
            kind = "no_victims"
        if kind is not None:
            if sig is not None:
                failed[sig] = (kind, job, "any")
            return note_of(job, kind), None
        return None, Search(tasks, victims, core_protected, sig)

    # Until something is committed the state stays as it is, so the jobs the action cannot help
    # get the same notes in any order: when no job needs a search (as in most cycles of a full
    # cluster), the action ends without ordering the jobs at all.
    notes: list[tuple[Job, Note]] = []
    needs_search = False
    for candidate in waiting if SCREEN_FIRST else ():
        if out_of_time(session):
            break  # as the ordered loop: the jobs screened so far keep their notes
        first_note, search = screen(candidate, in_order=False)
        if search is not None:
            needs_search = True
            break
        if first_note is not None:
            notes.append((candidate, first_note))
    if SCREEN_FIRST and not needs_search:
        for candidate, first_note in notes:
            add_note(session, candidate, first_note)
        return

    queue = JobQueue(session, session.capacity)
    for candidate in waiting:
        queue.push(candidate)
    while (job := queue.pop()) is not None:
        if out_of_time(session):
            break
        note, search = screen(job, in_order=True)
        if note is not None:
            add_note(session, job, note)
        if search is None:
            continue
        if representatives is not None and not representatives.easier(session, job):
            # KAI's ``MinimalJobRepresentatives``: not easier than a job whose search failed
            note = note_of(job, "no_scenario")
            if note is not None:
                add_note(session, job, note)
            continue
        if session.config.action_work_budget > 0 and session.work_left < PLACE_UNITS * len(search.victims):
            # ordering them would spend the rest of the budget (a contribution or more per job):
            # stop now rather than after the work (deterministic, as every other budget stop)
            session.work_left = 0
            out_of_time(session)
            break
        stream = victim_stream(session, search.victims, search.core_protected, memo=stream_keys)
        spend(session, PLACE_UNITS * len(stream))
        if not stream:
            note = note_of(job, "no_victims")
            if note is not None:
                add_note(session, job, note)
            if search.sig is not None:
                failed[search.sig] = ("no_victims", job, "any")
            continue
        tasks = search.tasks
        stmt = session.statement()
        log = SolveLog()
        outcome = solve(session, stmt, job, tasks, stream, make_validator(job, tasks), heads, moves_only, log)
        if outcome is None:
            stmt.rollback()
            note = note_of(job, "no_scenario")
            if note is not None:
                add_note(session, job, note)
            if not out_of_time(session):
                if search.sig is not None and not log.late:
                    failed[search.sig] = ("no_scenario", job, "later" if log.last and REUSE_LAST else "turn")
                if representatives is not None:
                    representatives.update(session, job)
            continue
        stmt.commit()
        failed.clear()
        session.action_notes.pop(job.name, None)
        record(session, action, job, outcome, describe)


# KAI's scheduling signatures (``--use-scheduling-signatures``, on by default): a job is not
# searched for when it is not easier than a job of the same signature whose search failed
# (tests switch it off to compare the exact shortcuts with a search per job).
SIGNATURES = True

Footprint = list[tuple[float, ...]]


def _signature(session: Session, job: Job) -> tuple[object, ...] | None:
    """KAI's scheduling-constraints signature of a job's pending pods, without their resource
    requests (those are compared by ``_easier``): priority, preemptibility and node selector. None
    for a job whose own pods or rules enter the search (pods already active, placement rules,
    topology, sub-groups): it is always searched for itself, as ``_alike`` does."""
    if job.has_rules or job.topology is not None or job.subgroups:
        return None
    if any(gang.status(session, t) != TaskState.PENDING for t in job.tasks):
        return None
    return (job.priority, job.is_preemptible, tuple(sorted(job.node_selector.items())))


def _footprint(session: Session, job: Job) -> Footprint:
    """The job's pending pods' requests, sorted (KAI's ``extractSortedResourceRequests``)."""
    return sorted(
        (t.gpu, t.gpu_memory_mib, float(t.gpu_fraction_devices), t.cpu_millis, t.memory_mib)
        for t in gang.pending_tasks(session, job)
    )


def _le(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True))


def _easier(job: Footprint, rep: Footprint) -> bool:
    """KAI's ``jobEasierToScheduleComparison``: fewer pods than the representative, or, pod by
    pod in sorted order, equal up to one that asks for no more and less somewhere."""
    if not job or not rep:
        return False
    if len(rep) > len(job):
        return True
    for i, a in enumerate(job):
        if i >= len(rep):
            return False
        if _le(a, rep[i]):
            if _le(rep[i], a):
                continue
            return True
    return False


def _smaller(new: Footprint, cur: Footprint) -> bool:
    """KAI's ``isPodGroupFootprintSmaller``: no more pods, each no larger in sorted order."""
    if not new or not cur or len(new) > len(cur):
        return False
    return all(_le(a, b) for a, b in zip(new, cur, strict=False))


@dataclass
class Representatives:
    """KAI's ``MinimalJobRepresentatives`` (``actions/common/minimal_job_comparison.go``): per
    signature the smallest job whose victim search failed; kept for the whole action, as in KAI
    (reclaim and preempt keep one set per leaf queue, consolidation one for all queues)."""

    per_queue: bool
    reps: dict[tuple[object, ...], Footprint] = field(default_factory=dict)

    def _key(self, session: Session, job: Job) -> tuple[object, ...] | None:
        sig = _signature(session, job)
        if sig is None:
            return None
        return (job.queue if self.per_queue else None, *sig)

    def easier(self, session: Session, job: Job) -> bool:
        key = self._key(session, job)
        rep = self.reps.get(key) if key is not None else None
        return rep is None or _easier(_footprint(session, job), rep)

    def update(self, session: Session, job: Job) -> None:
        key = self._key(session, job)
        if key is None:
            return
        new = _footprint(session, job)
        cur = self.reps.get(key)
        if cur is None or _smaller(new, cur):
            self.reps[key] = new


@dataclass
class Search:
    """A job's victim search, as the screens leave it."""

    tasks: list[Task]
    victims: list[Job]
    core_protected: set[str]
    sig: tuple[object, ...] | None


def _alike(session: Session, job: Job, tasks: list[Task]) -> tuple[object, ...] | None:
    """What the victim search sees of a preemptor, for jobs it treats the same way: queue,
    priority, preemptibility, node selector and the shapes of the step's tasks. None for a job
    whose own pods or rules enter the search (pods already active, placement rules, topology,
    sub-groups): it is always searched for itself."""
    if job.has_rules or job.topology is not None or job.subgroups or len(tasks) != len(job.tasks):
        return None
    if any(gang.status(session, t) != TaskState.PENDING for t in job.tasks):
        return None
    shapes = tuple(
        (t.gpu, t.gpu_memory_mib, t.cpu_millis, t.memory_mib, t.gpu_fraction_devices, t.subgroup)
        for t in tasks
    )
    return (job.queue, job.priority, job.is_preemptible, tuple(sorted(job.node_selector.items())), shapes)


# How a failure of job ``a`` carries over to an alike job ``b`` (``_carries``).
Carry = Literal["any", "turn", "later"]

# Let a search failure judged with no victim left after the preemptor carry to every alike job
# later in its leaf (``_carries``, "later"); tests switch it off to compare with ``_same_turn``.
REUSE_LAST = True


def _carries(session: Session, heads: PendingHeads, carry: Carry, a: Job, b: Job, in_order: bool) -> bool:
    """Whether ``b`` gets the note of the alike job ``a`` without a search of its own.

    * "any": ``a`` failed a screen or had no victims, which depend only on what ``_alike`` keeps.
    * "turn": ``a``'s search failed at or before the preemptor's placement: ``b`` must meet the
      state ``a`` met at its turn (``_same_turn``).
    * "later": moreover, in every scenario ``a``'s search simulated, every victim job came before
      the preemptor in allocate order (``SolveLog.last``). For ``b`` later in the same leaf's job
      order, ``AllocateOrder`` represents the leaf by the same pending jobs up to and including
      ``a`` (now another pending job, asking what ``a`` asked), so each scenario runs exactly as
      it did for ``a`` until ``a``'s turn; no victim job is left then, so only pending jobs of
      the leaf, which the simulation skips without changing anything, stand between that point
      and ``b``'s turn. ``b`` is placed in the state ``a`` was, with the same shapes and rules,
      and fails the same way in every scenario - and so does the search, whose choice of
      scenarios depends only on their results, on the victims and on the preemptor's shapes.
    """
    if carry == "any":
        return True
    if not in_order:
        return False
    if carry == "later":
        return (job_key(session, a), a.name) < (job_key(session, b), b.name)  # type: ignore[operator]
    return _same_turn(session, heads, a, b)


def _same_turn(session: Session, heads: PendingHeads, a: Job, b: Job) -> bool:
    """Whether a search for ``b`` meets the state ``a``'s met when each preemptor came up.

    ``AllocateOrder`` represents the preemptor's leaf by the leaf's pending jobs in job order
    (``heads``) until the preemptor's turn. Between ``a`` and ``b`` in that order every pending
    job asks for the same as ``a``: the leaf then has one key throughout, wins every turn in a
    row without any state changing, so ``b`` is placed in the very state ``a`` was. A search
    that failed at or before the preemptor's placement in every scenario (``SolveLog.late``
    unset) fails for ``b`` too."""
    lst = heads.by_leaf.get(b.queue, [])
    ka = (job_key(session, a), a.name)
    kb = (job_key(session, b), b.name)
    if not ka < kb:  # type: ignore[operator]
        return False
    req = heads.request(a)
    i = bisect.bisect_left(lst, ka)  # type: ignore[arg-type]
    j = bisect.bisect_left(lst, kb)  # type: ignore[arg-type]
    for _key, name in lst[i:j]:
        x = session.jobs[name]
        if gang.pending_tasks(session, x) and heads.request(x) != req:
            return False
    return True


def add_note(session: Session, job: Job, note: Note) -> None:
    notes = session.action_notes.setdefault(job.name, [])
    if note not in notes:
        notes.append(note)


def within_preemption_delay(session: Session, job: Job) -> bool:
    return preemption_delay_left(job) > 0


def preemption_delay_left(job: Job) -> float:
    """Seconds until the job may trigger evictions: ``max(creation, last eviction) + delay`` (§5.5)."""
    if job.preemption_delay_s is None:
        return 0.0
    waited = job.created_s if job.last_eviction_s is None else min(job.created_s, job.last_eviction_s)
    return job.preemption_delay_s - waited


def preemption_delay_note(session: Session, job: Job) -> Note:
    until = session.config.now + timedelta(seconds=preemption_delay_left(job))
    text = until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return reasons.PREEMPTION_DELAY_NOT_ELAPSED, reasons.preemption_delay(job.preemption_delay_s or 0.0, text)


def record(
    session: Session,
    action: str,
    job: Job,
    outcome: Outcome,
    describe: Callable[[Job, Task, Outcome], tuple[str, str]],
) -> None:
    for t, moved in [(t, False) for t in outcome.victims] + [(t, True) for t in outcome.moved]:
        vjob = session.task_job[t.name]
        message, why = describe(job, t, outcome)
        p = session.placements[t.name]
        ev = Eviction(
            task=t.name,
            job=vjob.name,
            queue=vjob.queue,
            action=action,
            message=message,
            evictor_job=job.name,
            evictor_queue=job.queue,
            reason=why,
            node=outcome.origin.get(t.name, p.node),
            moved_to=p.node if moved else None,
            pool=session.pool,
        )
        session.evictions.append(ev)
        if not moved:
            session.task_reasons[t.name] = message
        session.events.append((vjob.name, "Evict", message))
