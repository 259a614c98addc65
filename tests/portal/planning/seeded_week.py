"""A seeded week of history on a small cluster: two teams' queues that both want more than the
16 GPUs there are, so quotas decide who waits. Used by the planner's unit, page and browser tests."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from kai_portal.demo.past_jobs import Load, seed_past_week
from tests.portal import factories

LOADS = {
    "alpha": Load(14, gpus=(2, 4, 8), tasks=(1,), run_minutes=(60, 180)),
    "beta": Load(14, gpus=(2, 4, 8), tasks=(1,), run_minutes=(60, 180)),
}
DAYS = 7


def seed_week(now: datetime) -> dict[str, Any]:
    """Two 8-GPU nodes; ``dept`` (16) over ``alpha`` (team Alpha, quota 4) and ``beta`` (team Beta,
    quota 12); a week of finished jobs ending at ``now``. Returns the rows and the window."""
    factories.node("plan-node-1", gpus=8)
    factories.node("plan-node-2", gpus=8)
    alpha_team, beta_team = factories.team("alpha", name="Alpha"), factories.team("beta", name="Beta")
    dept = factories.queue("dept", gpu_quota=16, cpu_quota=100_000, memory_quota=1_048_576)
    alpha = factories.queue("alpha", parent=dept, team=alpha_team, gpu_quota=4, cpu_quota=1_000,
                            memory_quota=1_024)  # fmt: skip
    beta = factories.queue("beta", parent=dept, team=beta_team, gpu_quota=12, cpu_quota=1_000,
                           memory_quota=1_024)  # fmt: skip
    jobs = seed_past_week(now, LOADS, days=DAYS, seed=31)
    return {
        "dept": dept, "alpha": alpha, "beta": beta, "jobs": jobs,
        "start": now - timedelta(days=DAYS), "end": now,
        "swap": {"alpha": {"gpu_quota": 12.0}, "beta": {"gpu_quota": 4.0}},
        "today_quota": {"alpha": Decimal(4), "beta": Decimal(12)},
    }  # fmt: skip
