"""The search for one preemptor's step (KAI's ``job_solver.go``): a capacity screen over the
victim stream; on streams of at most ``Config.node_local_max_stream`` contributions, reclaim,
preempt and consolidation search every step as KAI does, by probes of the step's task count with
its node-local generator and then its multi-node one (``probe_search``), and nothing else. Longer
streams (and a call without the action's partial-step validator) search the greedy scenario and
the shortest working prefix, after the node-local generator for a one-task step; the prefix answer
wins unless the greedy one evicts strictly fewer tasks.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.actions.solvers.allocate_order import PendingHeads
from scheduler.actions.solvers.budget import out_of_time, spend
from scheduler.actions.solvers.free_capacity import FreeTracker, usable_nodes
from scheduler.actions.solvers.multi_node import multi_node_probe
from scheduler.actions.solvers.policy import Validator
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.actions.solvers.scenario_generators import (
    greedy_scenario,
    node_local,
    node_local_probe,
    shortest_prefix,
)
from scheduler.actions.solvers.simulation import SolveLog, simulate
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import NodeState
from scheduler.statement import Statement

# One probe of a scenario generator (``node_local_probe``, ``multi_node_probe``).
_Probe = Callable[
    [
        Session,
        Statement,
        Job,
        list[Task],
        list[Contribution],
        list[Contribution],
        Validator,
        PendingHeads | None,
        list[NodeState],
        set[tuple[int, frozenset[str], frozenset[str]]],
        SolveLog | None,
    ],
    Outcome | None,
]


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
    make_validator: Callable[[list[Task]], Validator] | None = None,
) -> Outcome | None:
    """Find the victims for the preemptor's step: fewest tasks, KAI's victim order on ties.

    ``make_validator(tasks)``: the action's scenario check for a part of the step (KAI's
    validators read the partial job a probe stands for); given, every action searches a stream
    within the cap by KAI's probes (``probe_search``)."""
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
    cap = session.config.node_local_max_stream
    if make_validator is not None and (cap is None or len(stream) <= cap):
        # KAI's generators in their registration order (sg-nodelocalgreedy, then
        # sg-multinodegang): where both find nothing, KAI's step fails (job_solver.go:
        # SolveWithResult), so no other search follows. Consolidation searches the same way
        # (consolidation.go: attemptToConsolidatePreemptor builds the same JobsSolver, with its
        # own victim queue and ``allPodsReallocated`` as the validator); its probes re-place
        # every victim through the node order as its other scenarios do (``simulate``).
        return probe_search(session, stmt, job, tasks, stream, make_validator, heads, nodes, log)
    elif len(tasks) == 1 and (cap is None or len(stream) <= cap):
        # KAI tries its node-local generator first and the multi-node one only when it finds
        # nothing (the generators registered by sg-nodelocalgreedy, then sg-multinodegang).
        # (Here, without the action's partial-step validator, the greedy and prefix search
        # below stand in for the multi-node one.)
        tried: set[frozenset[str]] = set()
        found = node_local(session, stmt, job, tasks, stream, validate, heads, moves_only, lo, tried, log)
        if found is not None or out_of_time(session):
            return found
    greedy = (
        greedy_scenario(session, stmt, job, tasks, stream) if len(tasks) > 1 or len(stream) > 32 else None
    )
    if greedy is not None and not greedy:
        # The step fits without evicting anything, but KAI never takes a scenario without victims
        # (``by_pod_solver.go: solve`` fails one whose victim list is empty): the search goes on
        # with the prefixes, from one victim up.
        greedy = None
    bound = sum(len(c.tasks) for c in greedy) if greedy is not None else None
    # Prefixes of at most ``bound`` tasks come before the greedy set, longer ones after it.
    mid = lo - 1
    n = sum(len(c.tasks) for c in stream[:mid])
    while mid < len(stream) and (bound is None or n + len(stream[mid].tasks) <= bound):
        n += len(stream[mid].tasks)
        mid += 1
    found = shortest_prefix(session, stmt, job, tasks, stream, validate, heads, moves_only, lo, mid, log)
    if found is not None or out_of_time(session):
        return found
    if greedy is not None:
        out = simulate(session, stmt, job, tasks, greedy, validate, heads, moves_only, log)
        if out is not None:
            return out
    return shortest_prefix(
        session, stmt, job, tasks, stream, validate, heads, moves_only, mid + 1, len(stream), log
    )


def probe_search(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    make_validator: Callable[[list[Task]], Validator],
    heads: PendingHeads | None,
    nodes: list[NodeState],
    log: SolveLog | None,
) -> Outcome | None:
    """KAI's ``JobSolver.SolveWithResult``: each generator in turn, the node-local one
    (``node_local_probe``) then the multi-node one (``multi_node_probe``), searches the step with
    its own probes (``generator_search``); the first answer wins. Failed scenarios are not tried
    again by either (KAI's fingerprints, kept for the whole step: the pending tasks, recorded and
    accumulated victims)."""
    tried: set[tuple[int, frozenset[str], frozenset[str]]] = set()
    for probe_fn in (node_local_probe, multi_node_probe):
        found = generator_search(
            session, stmt, job, tasks, stream, make_validator, heads, nodes, log, probe_fn, tried
        )
        if found is not None or out_of_time(session):
            return found
    return None


def generator_search(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    stream: list[Contribution],
    make_validator: Callable[[list[Task]], Validator],
    heads: PendingHeads | None,
    nodes: list[NodeState],
    log: SolveLog | None,
    probe_fn: _Probe,
    tried: set[tuple[int, frozenset[str], frozenset[str]]],
) -> Outcome | None:
    """KAI's search with one generator (``job_solver.go: solvePendingJobWithGenerator``): the
    largest solvable number of the step's tasks is found by probes at 1, 2, 4, ... tasks, then a
    binary search between the last success and the first failure (``searchMaxSolvableK``); each
    probe is rolled back, and the victims of a successful one are recorded: its scenario's victim
    groups of which some task was evicted or moved (``by_pod_solver.handleScenarioSolution``,
    ``getVictimJobsFromVictimTasks``). A probe evicts the recorded victims in every scenario it
    tries, first alone, and accumulates further victims from the stream less the recorded ones
    (``PodAccumulatedScenarioBuilder``). Finally the whole step is probed once more, kept this
    time (``probeAtK(n)``). So a gang whose first task a victim gang makes room for is placed over
    that gang, and one task's answer is the scenario of its actual victims only. Recorded victims
    start empty for each generator (``solvingState``)."""
    recorded: list[Contribution] = []

    def probe(k: int, keep: bool) -> Outcome | None:
        nonlocal recorded
        part = tasks[:k]
        cp = stmt.checkpoint()
        out = probe_fn(
            session, stmt, job, part, stream, recorded, make_validator(part), heads, nodes, tried, log
        )
        if out is None:
            return None
        hit = {t.key for t in out.victims} | {t.key for t in out.moved}
        recorded = [c for c in out.contributions if any(t.key in hit for t in c.tasks)]
        if not keep:
            stmt.rollback(cp)
        return out

    n = len(tasks)
    lo, hi, k = 0, 0, 1
    while True:
        if out_of_time(session):
            return None
        if probe(k, keep=False) is None:
            hi = k
            break
        lo = k
        if k == n:
            break
        k = min(2 * k, n)
    while hi - lo > 1:
        if out_of_time(session):
            return None
        mid = (lo + hi) // 2
        if probe(mid, keep=False) is None:
            hi = mid
        else:
            lo = mid
    if lo == 0:
        return None
    return probe(n, keep=True)
