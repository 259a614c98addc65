"""Scenario generation (§3.9): which victim sets a search simulates.

On a short victim stream every action probes the step with KAI's own generators
(``node_local_probe`` here, ``multi_node.multi_node_probe``; ``job_solver.probe_search``). On a
longer one, a one-task step tries KAI's node-local generator first (``node_local``:
plugins/nodelocalgreedy); then two generators propose victim sets:

* a node-local greedy one (``greedy_scenario``): task by task, the node that needs the fewest
  victim tasks to take it (this is what keeps large gangs cheap: whole nodes of small jobs are
  emptied one by one);
* KAI's growing prefix of the victim stream (``shortest_prefix``, victim order), as KAI's
  ``scenario_generator.go`` grows its scenarios; each prefix is simulated.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.actions.solvers.allocate_order import PendingHeads
from scheduler.actions.solvers.budget import PLACE_UNITS, out_of_time, spend
from scheduler.actions.solvers.free_capacity import FreeTracker, usable_nodes
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.actions.solvers.simulation import SolveLog, simulate
from scheduler.fit import node_fit
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import NodeState
from scheduler.statement import Statement


def greedy_scenario(
    session: Session, stmt: Statement, job: Job, tasks: list[Task], stream: list[Contribution]
) -> list[Contribution] | None:
    """Node-local greedy: for each preemptor task the usable node that needs the fewest victim
    tasks (victims on a node taken in victim order; ties by node name). Leaves ``stmt`` as found."""
    nodes = usable_nodes(session, job)
    if not nodes:
        return None
    greedy = _Greedy(session, stmt, job, stream, nodes)
    cp = stmt.checkpoint()
    try:
        for t in tasks:
            if out_of_time(session):
                return None
            spend(session, PLACE_UNITS)
            if not greedy.place(t):
                return None
        return [stream[i] for i in sorted(greedy.chosen)]
    finally:
        stmt.rollback(cp)


class _Greedy:
    """``greedy_scenario``'s state: the victim contributions on each node, those chosen so far,
    and per task shape the nodes' costs (``_Ranks``).

    Per task shape: the nodes' costs computed so far in a heap keyed (victim tasks, node order),
    nodes computed in node order up to ``scanned``. A node whose state changed is recomputed
    when its shape is next needed; entries of an older computation are skipped (``version``).
    The best node is then the first in node order among those needing the fewest victim
    tasks - as a scan of every node would find it - without re-reading every node per task."""

    def __init__(
        self, session: Session, stmt: Statement, job: Job, stream: list[Contribution], nodes: list[NodeState]
    ) -> None:
        self.session = session
        self.stmt = stmt
        self.job = job
        self.stream = stream
        self.nodes = nodes
        self.on_node: dict[str, list[int]] = {}
        for i, c in enumerate(stream):
            seen: set[str] = set()
            for t in c.tasks:
                n = session.placements[t.key].node
                if n and n not in seen:
                    seen.add(n)
                    self.on_node.setdefault(n, []).append(i)
        self.chosen: set[int] = set()
        self.index = {ns.name: i for i, ns in enumerate(nodes)}
        self.ranks: dict[tuple[float, ...], _Ranks] = {}

    def cost(self, ns: NodeState, t: Task) -> tuple[int, list[int]] | None:
        """Victim tasks the node needs freed for ``t`` (contributions in victim order), and which."""
        session, stmt, job = self.session, self.stmt, self.job
        if node_fit(session, ns, t, job).ok:
            return (0, [])
        res: tuple[int, list[int]] | None = None
        sub = stmt.checkpoint()
        n = 0
        picked: list[int] = []
        for i in self.on_node.get(ns.name, []):
            if i in self.chosen:
                continue
            for v in self.stream[i].tasks:
                stmt.evict(v)
            n += len(self.stream[i].tasks)
            picked.append(i)
            if node_fit(session, ns, t, job).ok:
                res = (n, picked)
                break
        stmt.rollback(sub)
        return res

    def push(self, r: _Ranks, ns: NodeState, t: Task) -> None:
        found = self.cost(ns, t)
        if found is not None:
            heapq.heappush(r.heap, (found[0], self.index[ns.name], r.version.get(ns.name, 0), found[1]))

    def best_for(self, t: Task) -> tuple[int, str, list[int]] | None:
        nodes = self.nodes
        shape = (t.gpu, t.gpu_memory_mib, t.cpu_millis, t.memory_mib)
        r = self.ranks.get(shape)
        if r is None:
            r = self.ranks[shape] = _Ranks()
        for name in sorted(r.stale, key=self.index.__getitem__):
            self.push(r, self.session.nodes[name], t)
        r.stale.clear()
        while True:
            while r.heap and r.heap[0][2] != r.version.get(nodes[r.heap[0][1]].name, 0):
                heapq.heappop(r.heap)
            if r.heap and r.heap[0][0] == 0:
                break  # nothing beats a node that needs no victim; later nodes come after it
            if r.scanned == len(nodes):
                break
            self.push(r, nodes[r.scanned], t)
            r.scanned += 1
        if not r.heap:
            return None
        top = r.heap[0]
        return top[0], nodes[top[1]].name, top[3]

    def place(self, t: Task) -> bool:
        """Evict the victims of ``t``'s best node and place it there (pipelined); False if none."""
        session, stmt = self.session, self.stmt
        best = self.best_for(t)
        if best is None:
            return False
        dirty = {best[1]}
        for i in best[2]:
            self.chosen.add(i)
            for v in self.stream[i].tasks:
                dirty.add(session.placements[v.key].node or "")
                stmt.evict(v)
        ns = session.nodes[best[1]]
        fit = node_fit(session, ns, t, self.job)
        if not fit.ok:
            return False
        stmt.place(t, ns.name, fit.devices, pipelined=True)
        for r in self.ranks.values():
            for name in dirty:
                pos = self.index.get(name)
                if pos is not None and pos < r.scanned:
                    r.version[name] = r.version.get(name, 0) + 1
                    r.stale.add(name)
        return True


@dataclass
class _Ranks:
    """``greedy_scenario``'s node costs for one task shape."""

    heap: list[tuple[int, int, int, list[int]]] = field(default_factory=list)
    scanned: int = 0
    version: dict[str, int] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)


def shortest_prefix(
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


def node_local(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None,
    moves_only: bool,
    lo: int,
    tried: set[frozenset[str]],
    log: SolveLog | None = None,
) -> Outcome | None:
    """KAI's first scenario generator (``plugins/nodelocalgreedy/generator.go``): the victim
    stream is accumulated one contribution at a time (``PodAccumulatedScenarioBuilder``); for each
    prefix that passes the capacity screen (``stream[:k]``, ``k >= lo``: KAI's accumulated
    idle-GPU filter), one scenario per node the latest victim job has a task on (node names in
    order): every victim job of the prefix with a victim task on that node, all its contributions
    (``VictimsTasksFromNodes``: gangs stay whole). The first scenario that works wins; a victim set
    already simulated for this step is not simulated again (``tried``: KAI's failed-scenario
    fingerprints, kept across the generators of one step).
    So a preemptor that fits on one node evicts only that node's victims, the first node (in victim
    order) that can take it, rather than a prefix spread over every node."""
    on_node: dict[str, list[str]] = {}  # node -> victim jobs with a victim task there, first seen first
    groups: dict[str, list[int]] = {}  # victim job -> its contributions' indexes in the prefix
    for k, c in enumerate(stream, start=1):
        groups.setdefault(c.job.key, []).append(k - 1)
        for t in c.tasks:
            node = session.placements[t.key].node
            if node is not None and c.job.key not in on_node.setdefault(node, []):
                on_node[node].append(c.job.key)
        if k < lo:
            continue
        nodes = sorted({p.node for t in c.job.tasks if (p := session.placements[t.key]).node is not None})
        for node in nodes:
            if out_of_time(session):
                return None
            jobs = on_node.get(node)
            if not jobs:
                continue
            picked = [stream[i] for i in sorted(i for j in jobs for i in groups[j])]
            key = frozenset(t.key for p in picked for t in p.tasks)
            if key in tried:
                continue
            tried.add(key)
            out = simulate(
                session, stmt, job, tasks, picked, validate, heads, moves_only, log, node_order=True
            )
            if out is not None:
                return out
    return None


def node_local_probe(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    recorded: list[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None,
    nodes: list[NodeState],
    tried: set[tuple[int, frozenset[str], frozenset[str]]],
    log: SolveLog | None = None,
) -> Outcome | None:
    """One probe of KAI's node-local generator for ``tasks`` (a part of the step) with the
    victims earlier probes recorded (``plugins/nodelocalgreedy/generator.go`` over a
    ``PodAccumulatedScenarioBuilder`` given ``RecordedVictimsJobs``).

    The first scenario is the recorded victims alone (``nodeLocalScenarios`` of a scenario with no
    potential victim). Then the stream, less the recorded tasks (``addNextPotentialVictims``
    skips them), is accumulated one contribution at a time; each accumulated scenario that passes
    the idle-GPU filter (``FreeTracker`` over the recorded and accumulated victims) gives one
    scenario per node the latest victim job has a task on: the recorded victims and every
    accumulated victim job with a task on that node, whole (``VictimsTasksFromNodes``)."""
    tracker = FreeTracker(session, nodes, tasks)
    spend(session, len(nodes))
    rec_keys = {t.key for c in recorded for t in c.tasks}
    for c in recorded:
        for t in c.tasks:
            tracker.add(t)
    recorded_set = frozenset(rec_keys)

    def attempt(picked: list[Contribution]) -> Outcome | None:
        key = (len(tasks), recorded_set, frozenset(t.key for c in picked for t in c.tasks))
        if key in tried:
            return None
        # node_order: every victim re-placed through the node order (KAI's AllocateJob(isPipelineOnly)),
        # which is all that moves_only changes in ``simulate``: consolidation probes the same way
        victims = recorded + picked
        out = simulate(session, stmt, job, tasks, victims, validate, heads, False, log, node_order=True)
        if out is None:
            tried.add(key)  # KAI fingerprints failed scenarios only: the final probe repeats a success
        return out

    if recorded and tracker.ok():
        out = attempt([])
        if out is not None:
            return out
    rest: list[Contribution] = []
    for c in stream:
        ts = [t for t in c.tasks if t.key not in rec_keys]
        if ts:
            rest.append(c if len(ts) == len(c.tasks) else Contribution(c.job, ts))
    on_node: dict[str, list[str]] = {}  # node -> victim jobs with a victim task there, first seen first
    groups: dict[str, list[int]] = {}  # victim job -> its contributions' indexes in the prefix
    for k, c in enumerate(rest, start=1):
        groups.setdefault(c.job.key, []).append(k - 1)
        for t in c.tasks:
            tracker.add(t)
            node = session.placements[t.key].node
            if node is not None and c.job.key not in on_node.setdefault(node, []):
                on_node[node].append(c.job.key)
        if not tracker.ok():
            continue
        names = sorted({p.node for t in c.job.tasks if (p := session.placements[t.key]).node is not None})
        for node in names:
            if out_of_time(session):
                return None
            jobs = on_node.get(node)
            if not jobs:
                continue
            out = attempt([rest[i] for i in sorted(i for j in jobs for i in groups[j])])
            if out is not None:
                return out
    return None
