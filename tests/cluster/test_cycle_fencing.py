"""Fencing in kubernetes mode (issue 26): a cycle overtaken by a newer one writes nothing to the cluster.

The simulated-mode tests are tests/portal/scheduling/test_cycle_fencing.py; here the backend is the
real API server's, where a bind cannot be rolled back, so the check must come before the first
call: the overtaken cycle planned a bind, and the pod has no node, no condition and no event from it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

import scheduler
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.history.models import Decision
from kai_portal.scheduling import fencing
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.lock import LOCK_NAME

from .conftest import Cluster, Nodes, cycle, pod_body

pytestmark = pytest.mark.django_db


def test_a_cycle_overtaken_between_plan_and_apply_binds_nothing_on_the_api_server(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    node = nodes.kwok("gpu-a")
    core = cluster.core
    core.create_namespaced_pod(
        namespace, pod_body("fenced", scheduler_name, gpus=2, labels={"kai.scheduler/queue": "team-a"})
    )
    planned: list[str] = []
    real = scheduler.run_cycle

    def planned_then_overtaken(*args: Any, **kwargs: Any) -> scheduler.CycleResult:
        result = real(*args, **kwargs)
        if not planned:
            planned.extend(
                t.node or "" for t in result.tasks.values() if t.status == scheduler.TaskState.ALLOCATED
            )
            fencing.take_token(LOCK_NAME)  # the next cycle starts while this one still runs
        return result

    monkeypatch.setattr(scheduler, "run_cycle", planned_then_overtaken)
    run = run_scheduling_cycle(now=timezone.now())

    assert planned == [node]  # it had a bind to make
    assert run.status == "aborted", run.error
    assert "newer cycle" in run.error
    pod = core.read_namespaced_pod("fenced", namespace)
    assert pod.spec.node_name is None
    assert not [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=fenced").items
    assert events == []
    assert not Decision.objects.exists()

    cycle()  # the next cycle, holding the newest token, binds it
    assert core.read_namespaced_pod("fenced", namespace).spec.node_name == node
