"""The quota preview equals what the next real cycle does after saving the change (simulated cluster)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from kai_portal.history.models import Decision, QueueStatus, SchedulingCycle
from kai_portal.previews.whatif import preview_queue_change
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db
LONG = timedelta(hours=2)


def _cycle_decisions(cycle: SchedulingCycle) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"start": set(), "evicted": set()}
    for kind, name in Decision.objects.filter(cycle=cycle).values_list("kind", "job__name"):
        if kind in ("allocated", "pipelined"):
            out["start"].add(name)
        elif kind == "evicted":
            out["evicted"].add(name)
    return out


def _fair_shares(resource: str = "gpu") -> dict[str, float]:
    return {
        name: float(value)
        for name, value in QueueStatus.objects.filter(resource=resource).values_list(
            "queue__name", "fair_share"
        )
    }


@pytest.fixture
def crowded(loop):
    """Team a runs 8 one-GPU jobs on an 8-GPU node under an 8-GPU quota; team b waits with 4."""
    factories.node("n1", gpus=8)
    dept = factories.queue("dept", gpu_quota=8)
    a = factories.queue("team-a", parent=dept, gpu_quota=8)
    b = factories.queue("team-b", parent=dept, gpu_quota=0)
    for i in range(8):
        factories.job(a, f"a{i}", duration=LONG)
    loop.run_many(2)
    for i in range(4):
        factories.job(b, f"b{i}", duration=LONG)
    loop.run_many(2)
    assert Pod.objects.filter(job__queue=a, state="running").count() == 8
    assert not Pod.objects.filter(job__queue=b).exclude(state="pending").exists()
    return a, b


def test_lowering_a_quota_below_use_previews_the_reclaim_the_next_cycle_then_does(loop, crowded):
    a, b = crowded
    now = loop.now + timedelta(seconds=5)

    preview = preview_queue_change(a, {"gpu_quota": Decimal(4)}, now)

    assert preview.ok, preview.errors
    rows = {q.queue: q for q in preview.queues}
    assert set(rows) == {"dept", "team-a", "team-b"}
    assert (rows["team-a"].share("gpu").deserved_before, rows["team-a"].share("gpu").deserved_after) == (8, 4)
    assert (rows["team-a"].share("gpu").fair_share_before, rows["team-a"].share("gpu").fair_share_after) == (
        8,
        6,
    )
    assert (rows["team-b"].share("gpu").fair_share_before, rows["team-b"].share("gpu").fair_share_after) == (
        0,
        2,
    )
    evicted = {j.name for j in preview.would_be_evicted}
    started = {j.name for j in preview.would_start}
    assert len(evicted) == 2 and evicted <= {f"a{i}" for i in range(8)}
    assert {j.how for j in preview.would_be_evicted} == {"reclaim"}
    assert {j.evictor_queue for j in preview.would_be_evicted} == {"team-b"}
    assert len(started) == 2 and started <= {f"b{i}" for i in range(4)}
    assert not any(j.without_change for j in preview.would_start + preview.would_be_evicted)
    assert {j.name for j in preview.reclaimable} == evicted  # a holds 8, its new share is 6
    warning = next(w for w in preview.warnings if w.resource == "gpu")
    assert (warning.kind, warning.value, warning.allocated) == ("quota", 4, 8)
    assert "GPU quota 4 GPUs is below the 8 GPUs team-a uses now: 4 GPUs above the quota" in warning.text

    # Apply the change for real; the next cycle does exactly what the preview said.
    a.gpu_quota = 4
    a.save()
    cycle = loop.run(5)
    assert cycle.started_at == now
    done = _cycle_decisions(cycle)
    assert done["evicted"] == evicted
    assert done["start"] == started
    shares = _fair_shares()
    for q in preview.queues:
        assert shares[q.queue] == pytest.approx(q.share("gpu").fair_share_after), q.queue


def test_raising_a_limit_previews_the_jobs_that_start(loop, db):
    factories.node("n1", gpus=8)
    dept = factories.queue("dept", gpu_quota=8)
    a = factories.queue("team-a", parent=dept, gpu_quota=2, gpu_limit=2)
    for i in range(4):
        factories.job(a, f"a{i}", duration=LONG)
    loop.run_many(2)
    assert Pod.objects.filter(job__queue=a, state="running").count() == 2
    now = loop.now + timedelta(seconds=5)

    preview = preview_queue_change(a, {"gpu_limit": Decimal(3)}, now)

    started = {j.name: j for j in preview.would_start}
    assert len(started) == 1
    assert next(iter(started.values())).how == "allocated"
    assert not preview.would_be_evicted and not preview.warnings
    a.gpu_limit = 3
    a.save()
    cycle = loop.run(5)
    assert _cycle_decisions(cycle) == {"start": set(started), "evicted": set()}
    assert Pod.objects.filter(job__name__in=started, state="bound").count() == 1


def test_lowering_a_limit_below_use_warns_and_evicts_nothing(loop, crowded):
    a, _ = crowded
    now = loop.now + timedelta(seconds=5)

    preview = preview_queue_change(a, {"gpu_quota": Decimal(3), "gpu_limit": Decimal(5)}, now)

    kinds = {(w.kind, w.value, w.allocated) for w in preview.warnings}
    assert kinds == {("quota", 3, 8), ("limit", 5, 8)}
    limit = next(w for w in preview.warnings if w.kind == "limit")
    assert "Nothing is evicted for a limit" in limit.text and "(3 GPUs over)" in limit.text
    # a's fair share falls to its limit 5; b may reclaim up to its share.
    a_row = next(q for q in preview.queues if q.queue == "team-a")
    assert a_row.share("gpu").fair_share_after == 5
    assert len(preview.reclaimable) == 3


def test_the_preview_writes_nothing(loop, crowded):
    a, _ = crowded
    counts = {
        m.__name__: m.objects.count() for m in (Queue, Job, Pod, Decision, SchedulingCycle, QueueStatus)
    }
    stamps = dict(Queue.objects.values_list("name", "updated_at"))
    pods = dict(Pod.objects.values_list("pk", "updated_at"))

    preview_queue_change(a, {"gpu_quota": Decimal(2), "priority": 50}, loop.now)

    assert counts == {
        m.__name__: m.objects.count() for m in (Queue, Job, Pod, Decision, SchedulingCycle, QueueStatus)
    }
    assert stamps == dict(Queue.objects.values_list("name", "updated_at"))
    assert pods == dict(Pod.objects.values_list("pk", "updated_at"))
    assert Queue.objects.get(pk=a.pk).gpu_quota == 8


def test_an_invalid_change_is_reported_as_field_errors_and_not_computed(loop, crowded):
    a, _ = crowded

    preview = preview_queue_change(a, {"gpu_quota": Decimal(5), "gpu_limit": Decimal(3)}, loop.now)
    assert not preview.ok
    assert "gpu_limit" in preview.errors and not preview.queues

    too_big = preview_queue_change(a, {"gpu_quota": Decimal(9)}, loop.now)
    assert "does not fit in parent queue 'dept'" in too_big.errors["gpu_quota"][0]


def test_moving_a_queue_shows_old_and_new_siblings(loop, db):
    factories.node("n1", gpus=8)
    d1 = factories.queue("d1", gpu_quota=4)
    d2 = factories.queue("d2", gpu_quota=4)
    mover = factories.queue("mover", parent=d1, gpu_quota=0)
    factories.queue("stay", parent=d1, gpu_quota=0)
    factories.queue("host", parent=d2, gpu_quota=0)
    for i in range(3):
        factories.job(mover, f"m{i}", duration=LONG)
    loop.run_many(1)

    preview = preview_queue_change(mover, {"parent": d2}, loop.now + timedelta(seconds=5))

    relations = {q.queue: q.relation for q in preview.queues}
    assert (
        relations["mover"] == "changed" and relations["stay"] == "sibling" and relations["host"] == "sibling"
    )
    assert ("parent", "d1", "d2") in preview.changes
