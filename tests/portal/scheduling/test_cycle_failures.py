"""A cycle that raises mid-apply leaves no half-written state; one failed bind is retried."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from kai_portal.cluster.backends import ApplyReport, OperationResult
from kai_portal.cluster.backends.simulated import SimulatedBackend
from kai_portal.history.models import Decision, JobMessage, QueueStatus, SchedulingCycle, UsageSample
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


class Boom(RuntimeError):
    pass


def _pod_rows() -> list[tuple]:
    return list(Pod.objects.order_by("pk").values_list("state", "node_id", "reason"))


def test_a_cycle_that_raises_while_persisting_leaves_nothing_half_written(loop, leaf, monkeypatch):
    factories.node("n1", gpus=1)
    factories.job(leaf, "runs", duration=timedelta(minutes=5))
    factories.job(leaf, "waits", duration=timedelta(minutes=5))
    before_pods, before_jobs = _pod_rows(), list(Job.objects.values_list("state", "message"))

    def fail(*args, **kwargs):
        raise Boom("database went away halfway")

    # Decisions and pod states are written by then; usage comes last.
    monkeypatch.setattr("kai_portal.scheduling.usage.record_usage", fail)
    with pytest.raises(Boom):
        loop.run()

    assert _pod_rows() == before_pods
    assert list(Job.objects.values_list("state", "message")) == before_jobs
    assert not Decision.objects.exists() and not JobMessage.objects.exists()
    assert not UsageSample.objects.exists() and not QueueStatus.objects.exists()
    cycle = SchedulingCycle.objects.get()
    assert cycle.status == "failed" and "database went away halfway" in cycle.error

    monkeypatch.undo()
    assert loop.run(5).status == "succeeded"
    assert sorted(s for s, _, _ in _pod_rows()) == ["bound", "pending"]


class ExplodingBackend(SimulatedBackend):
    def apply(self, binds, evictions, events):
        raise Boom("cluster API exploded")


def test_a_backend_that_raises_in_apply_leaves_the_database_unchanged(loop, leaf):
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    before = _pod_rows()

    with pytest.raises(Boom):
        loop.run(backend=ExplodingBackend(clock=lambda: loop.now))

    assert _pod_rows() == before and not Decision.objects.exists()
    assert SchedulingCycle.objects.get().status == "failed"


class RefusesOnce(SimulatedBackend):
    """Refuses the first bind of one pod, as an API server answering 409 would."""

    refused: set[str] = set()

    def apply(self, binds, evictions, events):
        report = super().apply(binds, evictions, events)
        results = []
        for r in report.results:
            if r.operation == "bind" and r.name == "flaky-0" and "flaky-0" not in self.refused:
                self.refused.add("flaky-0")
                r = dataclasses.replace(r, ok=False, error="409 Conflict: try again", status_code=409)
            results.append(r)
        return ApplyReport(results)


def test_a_failed_bind_is_recorded_and_retried_next_cycle(loop, leaf):
    factories.node("n1", gpus=2)
    flaky = factories.job(leaf, "flaky")
    fine = factories.job(leaf, "fine")
    backend = RefusesOnce(clock=lambda: loop.now)

    loop.run(backend=backend)

    pod = flaky.pods.get()
    assert pod.state == "pending"
    assert pod.reason == "Failed to bind pod leaf/flaky-0 to node n1. 409 Conflict: try again"
    assert Decision.objects.get(pod=pod).reason == "FailedBinding"
    assert fine.pods.get().state == "bound"
    assert SchedulingCycle.objects.get().counters["apply_failures"] == 1

    loop.run(5, backend=backend)
    pod.refresh_from_db()
    assert pod.state == "bound"
    assert Decision.objects.filter(pod=pod, kind="allocated").count() == 1


def test_operation_result_shape_used_by_the_test_double():
    # Guards the double above against changes to the backend interface.
    assert {f.name for f in dataclasses.fields(OperationResult)} >= {"operation", "name", "ok", "error"}
