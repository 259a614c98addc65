"""A job the cycle cannot handle is failed with a reason; the others are still scheduled (issue 14)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kai_portal.scheduling import snapshot_jobs
from kai_portal.workloads.models import Job
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.mark.postgres_only("SQLite cannot store the poisoned duration at all (its integers stop at 2**63)")
def test_a_job_whose_duration_overflows_is_failed_and_the_rest_scheduled(loop, leaf):
    factories.node("n1", gpus=2)
    poisoned = factories.job(leaf, "poisoned", duration=timedelta(minutes=5))
    assert loop.run().status == "succeeded"  # it gets bound, then runs
    assert loop.run(5).status == "succeeded"
    # A row written past the bounds (an old row, a bulk path, a manual edit): no validation.
    Job.objects.filter(pk=poisoned.pk).update(duration=timedelta(days=999_999_999))
    healthy = factories.job(leaf, "healthy", duration=timedelta(minutes=5))

    cycle = loop.run(5)

    assert cycle.status == "succeeded", cycle.error
    poisoned.refresh_from_db()
    assert poisoned.state == "failed"
    assert "could not handle this job" in poisoned.message and "out of range" in poisoned.message
    assert healthy.pods.get().state == "bound"
    # The failed job's pod releases its node, and later cycles go on normally.
    assert [loop.run(5).status for _ in range(3)] == ["succeeded"] * 3
    assert healthy.pods.get().state == "running"


def test_a_job_the_snapshot_cannot_convert_is_failed_and_the_rest_scheduled(loop, leaf, monkeypatch):
    factories.node("n1", gpus=1)
    bad = factories.job(leaf, "bad")
    good = factories.job(leaf, "good")
    real_task = snapshot_jobs.row_task

    def task(state, node, devices, job, name, owner, key):
        if job.pk == bad.pk:
            raise ArithmeticError("cannot convert this row")
        return real_task(state, node, devices, job, name, owner, key)

    monkeypatch.setattr(snapshot_jobs, "row_task", task)
    cycle = loop.run()

    assert cycle.status == "succeeded", cycle.error
    bad.refresh_from_db()
    assert bad.state == "failed" and "cannot convert this row" in bad.message
    assert bad.pods.get().state == "failed"
    assert good.pods.get().state == "bound"
