"""Two teams' jobs of one name (``train``) in the previews: each impact, victim and reason names
its own job and pod, with its own row's uid, as the next real cycle then does (the engine keys
jobs ``<namespace>/<queue>/<name>`` and the previews word its reasons through ``SnapshotIndex``)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from kai_portal.history.models import Decision
from kai_portal.previews.fitcheck import Verdict, check_fit
from kai_portal.previews.whatif import preview_queue_change
from kai_portal.workloads import submission
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db
LONG = timedelta(hours=2)


@pytest.fixture
def twins(loop, people):
    """Team a runs ``train`` (4 pods, elastic down to 2) on 4 GPUs; team b's quota is unused."""
    factories.node("n1", gpus=4)
    dept = factories.queue("dept", gpu_quota=4)
    a = factories.queue("team-a", parent=dept, team=people["teams"]["a"], gpu_quota=2)
    b = factories.queue("team-b", parent=dept, team=people["teams"]["b"], gpu_quota=2)
    theirs = factories.job(a, "train", task_count=4, min_member=2, duration=LONG)
    loop.run_many(2)
    assert Pod.objects.filter(job=theirs, state="running").count() == 4
    return a, b, theirs


def test_the_fit_check_of_a_train_beside_another_teams_train_names_each_its_own(loop, people, twins):
    a, b, theirs = twins
    other = people["users"]["other"]
    fields = {"queue": b, "name": "train", "gpu_count": 1, "task_count": 2, "min_member": 2, "duration": LONG}

    verdict = check_fit(other, fields, loop.now + timedelta(seconds=5))

    assert verdict.verdict == Verdict.NEEDS_EVICTION, verdict.summary
    [victim] = verdict.victims
    assert (victim.name, victim.uid, victim.queue, victim.tasks) == ("train", str(theirs.uid), "team-a", 2)
    assert victim.message.startswith("Pod team-a/train-") and " by workload team-b/train." in victim.message
    assert verdict.summary == "Starts after evicting running work — reclaiming from team-a: train."

    ours = submission.submit(Job(submitter=other, **fields))
    cycle = loop.run(5)
    evicted = Decision.objects.filter(cycle=cycle, kind="evicted")
    assert {d.job_id for d in evicted} == {theirs.pk} and evicted.count() == 2
    assert {d.evictor_job_id for d in evicted} == {ours.pk}
    # The victim's message is what the cycle then writes on that pod's decision (and why it was chosen).
    assert any(d.message.startswith(victim.message + "\n") for d in evicted)
    placed = Decision.objects.filter(cycle=cycle, kind__in=["allocated", "pipelined"])
    assert {d.job_id for d in placed} == {ours.pk}
    assert sorted(d.pod_name for d in placed) == ["train-0", "train-1"]


def test_a_waiting_trains_reasons_name_its_own_pods_not_the_other_teams(loop, people, twins):
    a, b, theirs = twins
    other = people["users"]["other"]
    fields = {"queue": b, "name": "train", "gpu_count": 3, "duration": LONG}  # above b's quota and limitless

    verdict = check_fit(other, fields, loop.now + timedelta(seconds=5))

    assert verdict.verdict == Verdict.WAITS, verdict.summary
    # The pod's own text is its fit error (KAI's pod event); the job's message names the pod.
    assert "team-b/train-0" in verdict.reason and "team-a/" not in verdict.reason + verdict.pod_reason
    ours = submission.submit(Job(submitter=other, **fields))
    loop.run(5)
    pod = Pod.objects.get(job=ours)
    ours.refresh_from_db()
    assert (pod.name, pod.state, pod.reason) == ("train-0", "pending", verdict.pod_reason)
    assert ours.message == verdict.reason
    assert Pod.objects.filter(job=theirs, state="running").count() == 4  # the other train untouched


def test_the_what_if_of_a_quota_change_names_each_train_with_its_own_row(loop, people, twins):
    a, b, theirs = twins
    b.gpu_quota = 0  # b's train waits: its fair share (1) is below its gang (2)
    b.save()
    ours = factories.job(b, "train", task_count=2, min_member=2, duration=LONG)
    loop.run_many(2)
    assert Pod.objects.filter(job=ours, state="pending").count() == 2
    now = loop.now + timedelta(seconds=5)

    preview = preview_queue_change(b, {"gpu_quota": Decimal(2)}, now)

    assert preview.ok, preview.errors
    [evicted] = preview.would_be_evicted
    [started] = preview.would_start
    assert (evicted.name, evicted.uid, evicted.queue, evicted.tasks) == (
        "train",
        str(theirs.uid),
        "team-a",
        2,
    )
    assert (evicted.evictor_job, evicted.evictor_queue) == ("train", "team-b")
    assert evicted.message.startswith("Pod team-a/train-") and " by workload team-b/train." in evicted.message
    assert (started.name, started.uid, started.queue, started.tasks) == ("train", str(ours.uid), "team-b", 2)

    b.gpu_quota = 2
    b.save()
    cycle = loop.run(5)
    evictions = Decision.objects.filter(cycle=cycle, kind="evicted")
    assert {d.job_id for d in evictions} == {theirs.pk} and evictions.count() == 2
    assert {d.evictor_job_id for d in evictions} == {ours.pk}
    placed = Decision.objects.filter(cycle=cycle, kind__in=["allocated", "pipelined"])
    assert {d.job_id for d in placed} == {ours.pk}
    assert any(d.message.startswith(evicted.message + "\n") for d in evictions)
