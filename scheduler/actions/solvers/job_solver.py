"""The search for one preemptor's step (KAI's ``job_solver.go``): a capacity screen over the
victim stream, KAI's node-local generator for a one-task step (on streams of at most
``Config.node_local_max_stream`` contributions), then the greedy scenario and the shortest working
prefix.

The prefix answer wins unless the greedy one evicts strictly fewer tasks.
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.actions.solvers.allocate_order import PendingHeads
from scheduler.actions.solvers.budget import out_of_time, spend
from scheduler.actions.solvers.free_capacity import FreeTracker, usable_nodes
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.actions.solvers.scenario_generators import (
    greedy_scenario,
    node_local,
    shortest_prefix,
)
from scheduler.actions.solvers.simulation import SolveLog, simulate
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.statement import Statement


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
    cap = session.config.node_local_max_stream
    if len(tasks) == 1 and (cap is None or len(stream) <= cap):
        # KAI tries its node-local generator first and the multi-node one only when it finds
        # nothing (the generators registered by sg-nodelocalgreedy, then sg-multinodegang).
        # (KAI's multi-node generator is not modelled yet: after the node-local one, the greedy
        # and prefix search below stand in for it.)
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
