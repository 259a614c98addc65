"""The eviction actions' search budget: work counted in units, and a wall-clock fault stop.

Every action's search is bounded by a work budget (``Config.action_work_budget``), so the answer
does not depend on the machine's speed; a wall-clock limit (``Config.action_time_budget_s``) is a
fault stop only, counted when hit. KAI bounds the same search by time alone
(``actions/common/solvers/search_budget.go``); see docs/kai-agreement.md.
"""

from __future__ import annotations

import time

from scheduler.session import Session


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
