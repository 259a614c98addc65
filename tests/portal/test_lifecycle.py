"""Cancelling a job: a conditional transition that frees its pods and keeps its history."""

from __future__ import annotations

import pytest

from kai_portal.accounts.models import User
from kai_portal.workloads.lifecycle import TransitionError, cancel_job
from kai_portal.workloads.models import Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


def test_cancel_releases_bound_pods_and_fails_pending_ones():
    q = factories.queue("team-a")
    job = factories.job(q, "train", task_count=2, min_member=1)
    running = Pod.objects.get(job=job, index=0)
    running.state = "running"
    running.save()
    user = User.objects.create_user("ana", password="x")

    cancel_job(job, actor=user)

    assert job.state == "cancelled" and job.finished_at is not None
    states = dict(Pod.objects.filter(job=job).values_list("index", "state"))
    assert states == {0: "releasing", 1: "failed"}
    assert Pod.objects.get(job=job, index=1).reason == "Job cancelled by ana."


def test_cancelling_a_finished_job_is_refused_and_changes_nothing():
    q = factories.queue("team-a")
    job = factories.job(q, "train")
    job.state = "succeeded"
    job.save()
    with pytest.raises(TransitionError, match="succeeded and cannot be cancelled"):
        cancel_job(job)
    job.refresh_from_db()
    assert job.state == "succeeded"
