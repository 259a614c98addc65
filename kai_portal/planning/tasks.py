"""The capacity plan's Celery task: both replays in the worker, progress written to the row."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from kai_portal.planning.models import PlanRun
from kai_portal.planning.replay import PlanInputs, replay

logger = logging.getLogger(__name__)


# The soft limit raises inside the replay, so the row is marked failed with the reason rather than
# left "running" by the hard kill.
@shared_task(
    name="kai_portal.planning.tasks.run_plan", ignore_result=True, soft_time_limit=570, time_limit=600
)
def run_plan(plan_id: int) -> None:
    """Run one queued plan (a plan already taken by another worker is left alone)."""
    taken = PlanRun.objects.filter(pk=plan_id, status=PlanRun.Status.QUEUED).update(
        status=PlanRun.Status.RUNNING, started_at=timezone.now(), progress=1, stage="starting"
    )
    if not taken:
        return
    plan = PlanRun.objects.get(pk=plan_id)

    def progress(percent: int, stage: str) -> None:
        PlanRun.objects.filter(pk=plan_id).update(progress=min(99, max(1, percent)), stage=stage[:200])

    try:
        outputs = replay(PlanInputs.from_json(plan.inputs), timezone.now(), progress)
    except Exception as error:  # the row says what failed; the worker goes on
        logger.exception("capacity plan %s failed", plan_id)
        PlanRun.objects.filter(pk=plan_id).update(
            status=PlanRun.Status.FAILED, finished_at=timezone.now(), stage="failed", error=str(error)[:2000]
        )
        return
    PlanRun.objects.filter(pk=plan_id).update(
        status=PlanRun.Status.SUCCEEDED,
        finished_at=timezone.now(),
        progress=100,
        stage="done",
        outputs=outputs,
    )


def enqueue(plan: PlanRun) -> None:
    """Send the plan to the worker once the row is committed (never run in the request)."""
    plan_id = plan.pk
    transaction.on_commit(lambda: run_plan.delay(plan_id))
