"""The stored forecast: computed by the scheduling worker after each cycle, read by pages and the API.

A forecast (``forecast.py``) simulates the cluster forward, which takes seconds on a
busy cluster; it must never run inside a web request. So:

* ``refresh(now, budget_s)`` runs in the scheduling worker right after a cycle
  (``after_cycle``). Positions are exact every cycle (one ordering per pool, cheap).
  The estimated start gets ``budget_s`` of wall time: one simulation, stopped at the
  budget; jobs it started are estimated anew, the others keep their older estimate
  (with its older ``estimated_at``) unless it is already contradicted, when they
  get the lower bound the simulation proved ("not before"). The per-job "does it
  fit at all" checks go stalest first (``fit_checked_at``). All rows are replaced in one
  transaction, so readers see one cycle's positions, never a mix.
* ``stored(job_ids)`` is all a request does: one query, no simulation, no cache
  (so the job list and submit work with Redis down).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from kai_portal.history.models import JobForecast, SchedulingCycle
from kai_portal.previews.forecast import (
    UNKNOWN_NEVER_FITS,
    UNKNOWN_NOT_BEFORE,
    UNKNOWN_NOT_YET,
    Forecast,
    ForecastInputs,
    estimate,
    explain_order,
    positions,
)
from kai_portal.scheduling.backlog import NOT_CONSIDERED
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.workloads.models import Job

logger = logging.getLogger(__name__)

_ESTIMATE_FIELDS = ("estimated_start", "unknown", "reason", "estimated_at", "not_before")


@dataclass
class RefreshReport:
    pending: int  # jobs with a position
    estimated: int  # jobs whose estimate was decided in this refresh
    kept: int  # jobs that kept an older estimate
    not_estimated: int  # jobs with no estimate at all yet
    seconds: float


def refresh(now: datetime, budget_s: float, pool: str | None = None) -> RefreshReport:
    """Recompute and store every pending job's position, and as many estimates as ``budget_s`` allows.

    ``pool``: that node pool's jobs only, after that pool's cycle (shards, issue 30); its rows
    alone are replaced, so two pools' refreshes never touch each other's rows."""
    started = time.monotonic()
    inp = build_snapshot(now, pool)
    data = ForecastInputs.load(inp)
    forecasts = positions(inp, data, now)
    previous = {
        row["job_id"]: row for row in JobForecast.objects.filter(job_id__in=forecasts).values(
            "job_id", "fit_checked_at", *_ESTIMATE_FIELDS
        )
    }  # fmt: skip
    # Fit checks: never checked first, then the oldest checks.
    stalest = sorted(
        forecasts, key=lambda pk: (previous.get(pk, {}).get("fit_checked_at") is not None,
                                   previous.get(pk, {}).get("fit_checked_at") or now)
    )  # fmt: skip
    decided = (
        estimate(inp, data, now, forecasts, deadline=started + budget_s, stalest_first=stalest)
        if forecasts
        else set()
    )
    kept = 0
    for pk, fc in forecasts.items():
        old = previous.get(pk)
        checked_now = fc.fit_checked_at is not None
        if not checked_now and old is not None:
            fc.fit_checked_at = old["fit_checked_at"]
        if pk in decided and fc.unknown == UNKNOWN_NOT_BEFORE and fc.not_before is not None and old:
            # Only a lower bound this time: an older estimate past it, or an older "never fits" that
            # was not re-checked now, is still the better answer.
            later = old["estimated_start"] is not None and old["estimated_start"] > fc.not_before
            never_fits = old["unknown"] == UNKNOWN_NEVER_FITS and not checked_now
            if not later and not never_fits:
                continue
            decided.discard(pk)
        if pk in decided:
            continue
        if old is not None and old["estimated_at"] is not None:
            for name in _ESTIMATE_FIELDS:
                setattr(fc, name, old[name])
            kept += 1
    explain_order(inp, forecasts)
    with transaction.atomic():
        (JobForecast.objects.all() if pool is None else JobForecast.objects.filter(pool=pool)).delete()
        JobForecast.objects.bulk_create(
            [
                JobForecast(
                    job_id=fc.job_id, pool=fc.pool, queue_position=fc.queue_position or 0,
                    queue_pending=fc.queue_pending, cluster_position=fc.cluster_position or 0,
                    cluster_pending=fc.cluster_pending, computed_at=now,
                    estimated_start=fc.estimated_start, unknown=fc.unknown, reason=fc.reason[:300],
                    estimated_at=fc.estimated_at, not_before=fc.not_before,
                    fit_checked_at=fc.fit_checked_at,
                )  # fmt: skip
                for fc in forecasts.values()
            ],
            batch_size=500,
        )
    return RefreshReport(
        pending=len(forecasts),
        estimated=len(decided),
        kept=kept,
        not_estimated=len(forecasts) - len(decided) - kept,
        seconds=time.monotonic() - started,
    )


def after_cycle(cycle: SchedulingCycle, now: datetime) -> None:
    """The scheduling worker's post-cycle hook: refresh the stored forecast; never fail the cycle."""
    if cycle.status != SchedulingCycle.Status.SUCCEEDED or not settings.FORECAST_AFTER_CYCLE:
        return
    try:
        report = refresh(now, float(settings.FORECAST_BUDGET_SECONDS), cycle.pool or None)
    except Exception:  # the forecast is advisory: the cycle's work is already saved
        logger.exception("forecast refresh after cycle %s failed", cycle.pk)
        return
    logger.debug("forecast after cycle %s: %s", cycle.pk, report)


def on_cycle_finished(sender: object, *, cycle: SchedulingCycle, now: datetime, **kwargs: object) -> None:
    """``scheduling.signals.cycle_finished``'s receiver (connected in apps.py)."""
    after_cycle(cycle, now)


# ---- reading (pages and the API) ----------------------------------------------


def _from_row(row: JobForecast) -> Forecast:
    return Forecast(
        job_id=row.job_id,
        pool=row.pool,
        queue_position=row.queue_position,
        queue_pending=row.queue_pending,
        cluster_position=row.cluster_position,
        cluster_pending=row.cluster_pending,
        jobs_ahead=row.cluster_position - 1,
        estimated_start=row.estimated_start,
        unknown=row.unknown if row.estimated_at is not None else UNKNOWN_NOT_YET,
        reason=row.reason if row.estimated_at is not None else "no estimate has been made yet",
        computed_at=row.computed_at,
        estimated_at=row.estimated_at,
        not_before=row.not_before,
    )


def stored(job_ids: list[int]) -> dict[int, Forecast]:
    """The stored forecasts of these jobs (one query); a job without one is missing from the answer."""
    if not job_ids:
        return {}
    return {row.job_id: _from_row(row) for row in JobForecast.objects.filter(job_id__in=job_ids)}


def stored_or_not_yet(job: Job) -> Forecast:
    return stored([job.pk]).get(job.pk) or not_yet(job)


def not_yet(job: Job) -> Forecast:
    """The forecast of a pending job that no cycle has looked at yet, or that the last cycle left
    out of a large backlog (``backlog.py``: it says so in its message)."""
    left_out = job.message.startswith(f"{NOT_CONSIDERED}:")
    return Forecast(
        job_id=job.pk,
        pool=job.node_pool.name if job.node_pool is not None else "default",
        unknown=UNKNOWN_NOT_YET,
        reason="its queue has more pending work ahead of it than one cycle can take, so no estimate yet"
        if left_out
        else "the next scheduling cycle has not looked at it yet",
    )


def describe(fc: Forecast, user: Any) -> dict[str, Any]:
    """A forecast for one user: the jobs ahead they may see by name, the others only counted."""
    if fc.cluster_position is not None and not fc.ahead:
        fc.ahead = list(
            JobForecast.objects.filter(pool=fc.pool, cluster_position__lt=fc.cluster_position)
            .order_by("cluster_position")
            .values_list("job_id", flat=True)
        )
    # The visible ones among them, by a join rather than a list of (up to thousands of) ids.
    visible = (
        {
            j.pk: j
            for j in Job.objects.visible_to(user)
            .filter(
                stored_forecast__pool=fc.pool, stored_forecast__cluster_position__lt=fc.cluster_position or 0
            )
            .select_related("queue")
            .only("pk", "uid", "name", "queue__name")
        }
        if fc.cluster_position is not None
        else {}
    )
    ahead = [visible[pk] for pk in fc.ahead if pk in visible]
    return {
        "forecast": fc,
        "ahead_visible": ahead,
        "ahead_hidden": len(fc.ahead) - len(ahead),
    }
