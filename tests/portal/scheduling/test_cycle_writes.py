"""How a cycle writes its rows: COPY / unnest / ANY on PostgreSQL and their SQLite forms write the
same values, and a cycle writes only what changed (issue 20, cycle I/O)."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext

import scheduler
from kai_portal.cluster.backends import ApplyReport
from kai_portal.core import bulk
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle
from kai_portal.nodes.models import Node
from kai_portal.scheduling.results import DECISION_FIELDS, persist_result
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.workloads.lifecycle import refresh_job_states
from kai_portal.workloads.models import Job, Pod
from scheduler.gc_pause import gc_paused
from tests.portal import factories

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# Texts COPY's text format must escape (tab, newline, backslash, its NULL marker) and others.
TEXTS = ["plain", "tab\there", "two\nlines", "back\\slash", "\\N", "quote ' and \"", "ünï ✓", "", "{a,b}"]


def _portable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the helpers take the path SQLite takes, on whichever database runs the test."""
    monkeypatch.setattr(bulk, "_postgres", lambda: False)


def _decision_rows(cycle: SchedulingCycle, pods: list[Pod]) -> list[tuple[object, ...]]:
    node = Node.objects.get()
    return [
        (cycle.pk, pod.pk if i % 3 else None, f"{pod.name}-{i}", pod.job_id, "unschedulable", "",
         node.pk if i % 2 else None, None, None, f"R{i}", text, T0 + timedelta(seconds=i))
        for i, (pod, text) in enumerate(zip(pods, TEXTS, strict=True))
    ]  # fmt: skip


def _written(cycle: SchedulingCycle) -> list[tuple[object, ...]]:
    fields = [f for f in DECISION_FIELDS if f != "cycle_id"]
    return list(Decision.objects.filter(cycle=cycle).order_by("message", "pod_name").values_list(*fields))


def test_copy_and_its_portable_fallback_write_what_bulk_create_writes(leaf, monkeypatch):
    factories.node("n1", gpus=1)
    pods = list(Pod.objects.filter(job=factories.job(leaf, "train", task_count=len(TEXTS))).order_by("index"))
    fast, portable, reference = (SchedulingCycle.objects.create(started_at=T0) for _ in range(3))

    with CaptureQueriesContext(connection) as queries:
        assert bulk.insert_rows(Decision, DECISION_FIELDS, _decision_rows(fast, pods)) == len(TEXTS)
    if connection.vendor == "postgresql":  # COPY, not an INSERT with a placeholder per value
        assert not [q for q in queries.captured_queries if "INSERT" in q["sql"]]
    with monkeypatch.context() as patch:
        _portable(patch)
        bulk.insert_rows(Decision, DECISION_FIELDS, _decision_rows(portable, pods))
    Decision.objects.bulk_create(
        Decision(**dict(zip(DECISION_FIELDS, row, strict=True))) for row in _decision_rows(reference, pods)
    )
    # auto_now_add overrode created_at in bulk_create: compare it apart.
    expected = [row[:-1] for row in _written(reference)]
    assert [row[:-1] for row in _written(fast)] == expected
    assert _written(fast) == _written(portable)
    assert {row[-1] for row in _written(fast)} == {T0 + timedelta(seconds=i) for i in range(len(TEXTS))}
    assert bulk.insert_rows(Decision, DECISION_FIELDS, []) == 0


@pytest.mark.parametrize("portable", [False, True], ids=["database's own", "portable"])
def test_update_rows_sets_listed_rows_where_the_condition_holds_and_nothing_else(leaf, monkeypatch, portable):
    if portable:
        _portable(monkeypatch)
    pods = list(
        Pod.objects.filter(job=factories.job(leaf, "train", task_count=len(TEXTS) + 2)).order_by("index")
    )
    Pod.objects.filter(pk=pods[1].pk).update(state="running")
    listed, unlisted = pods[: len(TEXTS)], pods[len(TEXTS) :]

    bulk.update_rows(Pod, ["reason"], [(p.pk, t) for p, t in zip(listed, TEXTS, strict=True)],
                     {"reason_at": T0}, where={"state": "pending"})  # fmt: skip

    after = dict(Pod.objects.values_list("pk", "reason"))
    reason_at = dict(Pod.objects.values_list("pk", "reason_at"))
    for pod, text in zip(listed, TEXTS, strict=True):
        held = pod.pk == pods[1].pk  # not pending: the conditional update leaves it
        assert (after[pod.pk], reason_at[pod.pk]) == ((pod.reason, None) if held else (text, T0))
    assert all(after[p.pk] == p.reason and reason_at[p.pk] is None for p in unlisted)
    # Several columns, a foreign key among them, and NULLs.
    node = factories.node("n1", gpus=0)
    bulk.update_rows(Pod, ["node", "reason"], [(pods[0].pk, node.pk, "x"), (pods[2].pk, None, "y")])
    assert list(Pod.objects.filter(pk__in=[pods[0].pk, pods[2].pk]).order_by("index").values_list(
        "node_id", "reason")) == [(node.pk, "x"), (None, "y")]  # fmt: skip


@pytest.mark.parametrize("portable", [False, True], ids=["database's own", "portable"])
def test_any_of_selects_what_in_selects(leaf, monkeypatch, portable):
    if portable:
        _portable(monkeypatch)
    monkeypatch.setattr(bulk, "IN_CHUNK", 2)  # several slices on the portable path
    ids = sorted(
        Pod.objects.filter(job=factories.job(leaf, "train", task_count=5)).values_list("pk", flat=True)
    )
    for wanted in ([], ids[:1], ids[1:4], [*ids, 10**9]):
        found = [pk for part in bulk.id_slices(wanted) for pk in
                 Pod.objects.filter(bulk.AnyOf(F("pk"), part)).values_list("pk", flat=True)]  # fmt: skip
        assert sorted(found) == sorted(Pod.objects.filter(pk__in=wanted).values_list("pk", flat=True))
    assert not Pod.objects.filter(bulk.AnyOf(F("pk"), [])).exists()


def _cycle(now: datetime) -> SchedulingCycle:
    """Build, run and persist one cycle as the loop does (no cluster: nothing else writes rows)."""
    with transaction.atomic():
        inp = build_snapshot(now)
        result = scheduler.run_cycle(inp.snapshot, inp.config)
        cycle = SchedulingCycle.objects.create(started_at=now)
        return persist_result(cycle, inp, result, ApplyReport(), now)


def test_a_second_cycle_with_nothing_changed_writes_no_pod_job_or_decision_row(leaf):
    factories.node("n1", gpus=1)
    runs = factories.job(leaf, "runs")
    waits = factories.job(leaf, "waits", task_count=2, min_member=2)
    first = _cycle(T0)
    assert first.allocated_count == 1 and first.unschedulable_count == 2
    reasons = dict(Pod.objects.filter(job=waits).values_list("pk", "reason"))
    assert all(reasons.values()) and Job.objects.get(pk=waits.pk).message
    assert Job.objects.get(pk=runs.pk).state == "running"

    with CaptureQueriesContext(connection) as queries:
        second = _cycle(T0 + timedelta(seconds=5))

    assert second.unschedulable_count == 2  # still waiting, for the same reasons
    writes = [
        q["sql"] for q in queries.captured_queries if q["sql"].lstrip().startswith(("UPDATE", "INSERT"))
    ]
    assert not [sql for sql in writes if '"workloads_' in sql], writes
    assert not Decision.objects.filter(cycle=second).exists()
    assert not JobMessage.objects.filter(cycle=second).exists()
    assert set(Pod.objects.filter(job=waits).values_list("reason_at", flat=True)) == {T0}

    # A changed reason is written, with its time, a decision and the new job message.
    Node.objects.filter(name="n1").update(schedulable=False)
    third = _cycle(T0 + timedelta(seconds=10))
    changed = dict(Pod.objects.filter(job=waits).values_list("pk", "reason"))
    assert all(changed[pk] != text for pk, text in reasons.items())
    assert set(Pod.objects.filter(job=waits).values_list("reason_at", flat=True)) == {
        T0 + timedelta(seconds=10)
    }
    assert sorted(Decision.objects.filter(cycle=third).values_list("message", flat=True)) == sorted(
        changed.values()
    )
    assert (
        JobMessage.objects.filter(cycle=third, job=waits).get().message
        == Job.objects.get(pk=waits.pk).message
    )


@pytest.mark.parametrize(
    ("pods", "gang", "state", "stale"),
    [
        (["succeeded", "succeeded"], 1, "succeeded", False),
        (["failed", "succeeded"], 1, "failed", False),
        (["failed", "pending"], 1, "pending", False),
        (["running", "pending"], 2, "pending", True),
        (["releasing", "pending"], 2, "pending", True),
        (["bound", "running"], 2, "running", False),
        (["succeeded", "running", "pending"], 3, "running", False),
        (["pending", "pending"], 1, "pending", False),
    ],
)
def test_job_state_follows_its_pods(leaf, pods, gang, state, stale):
    job = factories.job(leaf, "train", task_count=len(pods), min_member=gang)
    for index, pod_state in enumerate(pods):
        Pod.objects.filter(job=job, index=index).update(state=pod_state)

    refresh_job_states([job.pk], T0)

    job.refresh_from_db()
    assert job.state == state
    assert job.stale_since == (T0 if stale else None)
    assert (job.started_at == T0) == (state == "running")
    assert (job.finished_at == T0) == (state in ("succeeded", "failed"))


def test_gc_paused_restores_the_collector_as_it_was():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer one set it
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError
    assert gc.isenabled()
