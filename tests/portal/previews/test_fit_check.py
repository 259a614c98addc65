"""The fit check's verdict equals what the next real cycle does after submitting the job."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from kai_portal.history.models import Decision
from kai_portal.previews.fitcheck import Verdict, check_fit
from kai_portal.workloads import submission
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db
LONG = timedelta(hours=2)


@pytest.fixture
def queues(people):
    dept = factories.queue("dept", gpu_quota=8)
    a = factories.queue("team-a", parent=dept, team=people["teams"]["a"], gpu_quota=4, gpu_limit=6)
    b = factories.queue("team-b", parent=dept, team=people["teams"]["b"], gpu_quota=4)
    return a, b


def _draft(queue, name="draft", **fields):
    return {"queue": queue, "name": name, "gpu_count": 1, "duration": LONG, **fields}


def _submit(user, fields):
    return submission.submit(Job(submitter=user, **fields))


def test_a_job_that_fits_starts_now_and_the_next_cycle_binds_it(loop, people, queues):
    a, _ = queues
    factories.node("n1", gpus=8)
    member = people["users"]["member"]
    now = loop.now + timedelta(seconds=5)
    fields = _draft(a, gpu_count=2, task_count=2, min_member=2)

    verdict = check_fit(member, fields, now)

    assert verdict.verdict == Verdict.STARTS_NOW
    assert verdict.placed == 2 and verdict.nodes == ["n1"]
    assert verdict.summary == "Starts now: 2 tasks fit on n1."
    job = _submit(member, fields)
    loop.run(5)
    assert set(Pod.objects.filter(job=job).values_list("state", flat=True)) == {"bound"}


def test_a_job_that_must_wait_is_told_the_reason_the_next_cycle_gives(loop, people, queues):
    a, _ = queues
    factories.node("n1", gpus=4)
    for i in range(4):
        factories.job(a, f"a{i}", duration=LONG, priority_class="build")  # same queue, not lower priority
    loop.run_many(2)
    member = people["users"]["member"]
    fields = _draft(a)

    verdict = check_fit(member, fields, loop.now + timedelta(seconds=5))

    assert verdict.verdict == Verdict.WAITS
    assert verdict.summary.startswith("Waits for free resources")
    assert "didn't have enough resources: GPUs" in verdict.pod_reason
    job = _submit(member, fields)
    loop.run(5)
    pod = Pod.objects.get(job=job)
    job.refresh_from_db()
    assert pod.state == "pending"
    assert pod.reason == verdict.pod_reason
    assert job.message == verdict.reason


def test_more_gpus_than_any_node_never_fits(loop, people, queues):
    a, _ = queues
    a.gpu_limit = -1
    a.save()
    factories.node("n1", gpus=8)
    factories.node("n2", gpus=8)

    verdict = check_fit(people["users"]["member"], _draft(a, gpu_count=16), loop.now)

    assert verdict.verdict == Verdict.NEVER_FITS
    assert verdict.reason_code == "MaxNodePoolResources"
    assert "Max GPU resources available in a single node in the default node-pool is topped at 8" in (
        verdict.pod_reason
    )
    assert verdict.summary == "Can never fit: no node in the default pool is that big (see the reason below)."


def test_more_gpu_memory_than_any_gpu_never_fits_and_says_so(loop, people, queues):
    """The engine's text for this was its reclaim and preempt attempts ("ReclaimNotPossible: ...
    vision uses GPU: 0 ...") with "didn't have enough resources: GPU memory" behind them; the
    verdict now names the largest GPU of the pool, as the submit form's refusal does."""
    a, _ = queues
    factories.node("n1", gpus=8)

    verdict = check_fit(people["users"]["member"], _draft(a, gpu_count=0, gpu_memory_mib=90_000), loop.now)

    assert verdict.verdict == Verdict.NEVER_FITS
    assert verdict.summary == "Can never fit: no node in the default pool is that big."
    assert verdict.detail == (
        "Each task asks for 90000 MiB of one GPU's memory, but the largest GPU in the default pool "
        "has 81920 MiB; the job could never start."
    )


def test_a_pool_without_gpus_never_fits(loop, people, queues):
    a, _ = queues
    factories.node("cpu-1", pool="cpu", gpus=0)
    from kai_portal.nodes.models import NodePool

    cpu_only = factories.queue("team-a-cpu", team=a.team, node_pool=NodePool.objects.get(name="cpu"))
    verdict = check_fit(people["users"]["member"], _draft(cpu_only), loop.now)
    assert verdict.verdict == Verdict.NEVER_FITS
    assert verdict.summary == "Can never fit: no node in the cpu pool has GPUs."


def test_a_job_above_the_queue_limit_never_fits_with_kai_over_limit_text(loop, people, queues):
    a, _ = queues
    factories.node("n1", gpus=8)
    member = people["users"]["member"]
    fields = _draft(a, gpu_count=7)

    verdict = check_fit(member, fields, loop.now + timedelta(seconds=5))

    assert verdict.verdict == Verdict.NEVER_FITS
    assert verdict.reason_code == "OverLimit"
    assert "team-a quota has reached the allowable limit of GPUs. Limit is 6 GPUs" in verdict.reason
    job = _submit(member, fields)
    loop.run(5)
    job.refresh_from_db()
    assert job.message == verdict.reason


def test_non_preemptible_above_quota_never_fits(loop, people, queues):
    a, _ = queues
    factories.node("n1", gpus=8)

    verdict = check_fit(
        people["users"]["member"], _draft(a, gpu_count=5, preemptibility="non-preemptible"), loop.now
    )
    assert verdict.verdict == Verdict.NEVER_FITS
    assert verdict.reason_code == "NonPreemptibleOverQuota"


def test_a_job_that_reclaims_names_the_victims_the_next_cycle_evicts(loop, people, queues):
    a, b = queues
    factories.node("n1", gpus=8)
    for i in range(8):
        factories.job(b, f"b{i}", duration=LONG)
    loop.run_many(2)
    member = people["users"]["member"]
    fields = _draft(a, gpu_count=2)

    verdict = check_fit(member, fields, loop.now + timedelta(seconds=5))

    assert verdict.verdict == Verdict.NEEDS_EVICTION
    victims = {v.name for v in verdict.victims}
    assert len(victims) == 2 and {v.action for v in verdict.victims} == {"reclaim"}
    assert {v.queue for v in verdict.victims} == {"team-b"}
    assert verdict.summary.startswith("Starts after evicting running work — reclaiming from team-b: ")
    job = _submit(member, fields)
    cycle = loop.run(5)
    evicted = Decision.objects.filter(cycle=cycle, kind="evicted")
    assert set(evicted.values_list("job__name", flat=True)) == victims
    assert set(evicted.values_list("evictor_job", flat=True)) == {job.pk}
    assert Decision.objects.filter(cycle=cycle, job=job, kind="pipelined").count() == 1


def test_only_queues_the_user_may_submit_to(loop, people, queues):
    _, b = queues
    factories.node("n1", gpus=8)
    with pytest.raises(ValidationError) as exc:
        check_fit(people["users"]["member"], _draft(b), loop.now)
    assert "queue" in exc.value.message_dict


def test_the_fit_check_writes_nothing(loop, people, queues):
    a, _ = queues
    factories.node("n1", gpus=8)
    before = (Job.objects.count(), Pod.objects.count(), Decision.objects.count())
    check_fit(people["users"]["member"], _draft(a), loop.now)
    assert (Job.objects.count(), Pod.objects.count(), Decision.objects.count()) == before
