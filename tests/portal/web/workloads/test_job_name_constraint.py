"""The database keeps the name rule (issue 26), on PostgreSQL and SQLite alike: a queue's pending
and running portal jobs have distinct names; finished jobs and jobs found in the cluster are not
held to it. The real race (8 parallel submits) is ``tests/portal/hardening/test_concurrent_submits.py``."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from kai_portal.workloads.choices import JobState
from kai_portal.workloads.models import Job


def _raw(job: Job, **fields: Any) -> Job:
    """A row written without ``full_clean``: what a racing request's insert does after its check."""
    twin = Job(**{"queue": job.queue, "name": job.name, "submitter": job.submitter, "priority": 50, **fields})
    twin.save(validate=False)
    return twin


def test_the_database_refuses_a_second_live_job_of_a_name(world: dict) -> None:
    job = world["jobs"]["alpha"]
    clash = "job_live_name_unique_in_queue|UNIQUE constraint failed: workloads_job.queue_id"
    with pytest.raises(IntegrityError, match=clash), transaction.atomic():
        _raw(job)
    _raw(job, state=JobState.SUCCEEDED)  # a finished job keeps its name
    _raw(job, cluster_key="ns/PodGroup/alpha-job", submitter=None)  # found in the cluster
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    _raw(job)  # the name is free again once the first job ended
    assert Job.objects.filter(name=job.name, state__in=JobState.active()).count() == 2


def test_a_submit_whose_check_lost_the_race_gets_the_name_rule(
    world: dict, client_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check ran before the rival job committed: it saw no clash; the insert meets the rival.
    monkeypatch.setattr(Job, "_check_name", lambda self, errors: None)
    manifest = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: alpha-job, labels: {kai.scheduler/queue: alpha-train}}\n"
        "spec: {containers: [{name: a, image: busybox}]}\n"
    )
    response = client_for("member").post("/jobs/submit/yaml/", {"manifest": manifest})
    assert response.status_code == 200
    assert "already has a pending or running job named &#x27;alpha-job&#x27;" in response.content.decode()
    assert Job.objects.filter(name="alpha-job").count() == 1
