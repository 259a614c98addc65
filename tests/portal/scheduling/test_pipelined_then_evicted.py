"""A pod pipelined and then evicted in the same cycle (KAI reports it Releasing) still waits.

KAI's ``Statement.Evict`` sets any evicted task Releasing, one that a reclaim pipelined earlier
in the same cycle too (``framework/statement.go``), so the engine reports such a task Releasing on
the node it was pipelined to, holding nothing (``tests/scenarios/kai-diff/
pipelined-task-evicted-in-the-same-cycle-is-releasing.yaml`` pins the engine's side). The pod
never bound: in the rows it is still pending, and its reason must say why it waits now, not what
an earlier cycle said. Here the engine's result is rewritten to that outcome for one pending pod,
as the engine produces it, to hold the portal's side.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import scheduler
from kai_portal.history.models import Decision
from kai_portal.workloads.models import Pod
from scheduler import reasons
from scheduler.reasons import Ref
from scheduler.result import Eviction
from tests.portal import factories

pytestmark = pytest.mark.django_db


def _pipelined_then_evicted(monkeypatch: pytest.MonkeyPatch, task_name: str, node: str) -> None:
    real = scheduler.run_cycle

    def run(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        for key, outcome in result.tasks.items():
            if key.endswith(task_name):
                message = reasons.evicted_by_preempt(
                    Ref(key, "default"), Ref(outcome.job, "default", kind="job")
                )
                result.tasks[key] = replace(
                    outcome, status=scheduler.TaskState.RELEASING, node=node, gpu_devices=(), reason=message
                )
                result.evictions.append(Eviction(key, outcome.job, "leaf", "preempt", message, node=node))
        return result

    monkeypatch.setattr(scheduler, "run_cycle", run)


def test_a_pod_pipelined_then_evicted_in_one_cycle_stays_pending_with_the_eviction_as_its_reason(
    loop: Any, leaf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    factories.node("n1", gpus=1)
    factories.job(leaf, "holder", gpu_count=1)
    waiting = factories.job(leaf, "waiter", gpu_count=1)
    loop.run()
    pod = Pod.objects.get(job=waiting)
    assert pod.state == "pending" and pod.reason
    before = pod.reason

    _pipelined_then_evicted(monkeypatch, pod.name, "n1")
    loop.run(5)

    pod.refresh_from_db()
    waiting.refresh_from_db()
    assert pod.state == "pending" and pod.node is None, "a pod that never bound holds no node"
    assert waiting.state == "pending", "an eviction before the pod ever started does not end its job"
    assert pod.reason != before and "preempted" in pod.reason, pod.reason
    assert Decision.objects.filter(pod_id=pod.pk, kind="evicted").exists()
