"""Reason history survives the job and its pods, until the retention period prunes it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from kai_portal.history.models import Decision, JobMessage, SchedulingCycle, UsageSample
from kai_portal.history.retention import prune_history
from kai_portal.nodes.models import PoolUsageSample
from kai_portal.workloads.models import Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


def test_history_survives_the_job_ending_and_its_pods_being_deleted(loop, leaf, portal_admin):
    factories.node("n1", gpus=2)
    factories.job(leaf, "first", gpu_count=2, duration=timedelta(seconds=20))
    job = factories.job(leaf, "second", gpu_count=2, duration=timedelta(seconds=20))
    for _ in range(12):
        loop.run(5)
    job.refresh_from_db()
    assert job.state == "succeeded"
    kinds = sorted(Decision.objects.filter(job=job).values_list("kind", flat=True))
    assert kinds == ["allocated", "unschedulable"]

    Pod.objects.filter(job=job).delete()  # the cluster deleted them
    assert sorted(Decision.objects.filter(job=job).values_list("kind", "pod_name")) == [
        ("allocated", "second-0"),
        ("unschedulable", "second-0"),
    ]

    page = Client()
    page.force_login(portal_admin)
    html = page.get(f"/jobs/{job.uid}/").content.decode()
    assert 'data-testid="timeline"' in html and "second-0" in html and "Unschedulable" in html

    api = APIClient()
    api.force_authenticate(portal_admin)
    body = api.get(f"/api/v1/decisions/?job={job.uid}").json()
    assert sorted((d["kind"], d["pod"]) for d in body["results"]) == [
        ("allocated", "second-0"),
        ("unschedulable", "second-0"),
    ]


def test_prune_removes_exactly_the_rows_older_than_the_cutoff(loop, leaf, settings):
    settings.REASON_RETENTION_DAYS = 2
    settings.USAGE_RETENTION_DAYS = 5
    factories.node("n1", gpus=2)
    factories.job(leaf, "a", gpu_count=2, duration=timedelta(seconds=10))
    factories.job(leaf, "b", gpu_count=2, duration=timedelta(seconds=10))
    old = [loop.run(5) for _ in range(6)]
    loop.run(3 * 86400)  # three days later
    factories.job(leaf, "c", gpu_count=2, duration=timedelta(seconds=10))
    recent = [loop.run(5) for _ in range(3)]
    now = loop.now + timedelta(days=1)

    old_ids = [c.pk for c in old]
    expected_decisions = Decision.objects.filter(cycle_id__in=old_ids).count()
    expected_messages = JobMessage.objects.filter(cycle_id__in=old_ids).count()
    kept_decisions = Decision.objects.exclude(cycle_id__in=old_ids).count()
    samples = UsageSample.objects.count() + PoolUsageSample.objects.count()
    assert expected_decisions > 0 and kept_decisions > 0

    report = prune_history(now)
    assert (report.decisions, report.job_messages, report.cycles) == (
        expected_decisions,
        expected_messages,
        6,
    )
    assert report.usage_samples == 0  # usage is kept 5 days
    assert not Decision.objects.filter(cycle_id__in=old_ids).exists()
    assert Decision.objects.count() == kept_decisions
    assert set(SchedulingCycle.objects.values_list("pk", flat=True)) >= {c.pk for c in recent}
    assert UsageSample.objects.count() + PoolUsageSample.objects.count() == samples

    # Two more days: the old usage goes too, the recent usage stays.
    later = prune_history(now + timedelta(days=2, hours=1))
    # Queue and pool samples alike (the nodes page's pool history is usage too).
    left = UsageSample.objects.count() + PoolUsageSample.objects.count()
    assert later.usage_samples == samples - left > 0
    assert UsageSample.objects.filter(sampled_at__gte=recent[0].started_at).exists()


def test_prune_history_command_and_beat_entry(settings, db):
    from io import StringIO

    out = StringIO()
    call_command("prune_history", stdout=out)
    assert "pruned 0 decisions" in out.getvalue()
    entry = settings.CELERY_BEAT_SCHEDULE["prune-history"]
    assert entry["task"] == "kai_portal.scheduling.tasks.prune_history" and entry["schedule"] == 86400
