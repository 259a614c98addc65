"""The scheduler process's loop on the real API server (scheduling/event_loop.py, issue 29): a new
pending pod starts a cycle without waiting for CYCLE_SECONDS, the cycle binds it from the watches'
copy, and a cycle's own binds start no further cycle. Asserted on the order of what happened, never
on wall time: the periodic cycle is an hour away, so any cycle after the first was triggered."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from kai_portal.cluster.backends import ClusterBackend
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.event_loop import PERIODIC, CycleStart, EventLoop

from .conftest import Cluster, Nodes, pod_body, wait_until
from .test_pod_grouping import podgroup_crd  # noqa: F401
from .test_pod_groups_written import pod_groups

pytestmark = pytest.mark.django_db(transaction=True)
HOUR = 3600.0


def _cycle(backend: ClusterBackend) -> SchedulingCycle:
    return run_scheduling_cycle(backend=backend)


@pytest.fixture
def loop(portal: KubernetesBackend, settings: object) -> Iterator[EventLoop]:
    """The loop of ``manage.py run_scheduler`` in a thread, with CYCLE_SECONDS an hour."""
    event_loop = EventLoop(portal, interval=HOUR, quiet=0.1, longest=1.0, run_cycle=_cycle)

    def run() -> None:
        try:
            event_loop.run()
        finally:
            connections.close_all()  # this thread's own database connection

    thread = threading.Thread(target=run, name="event-loop", daemon=True)
    thread.start()
    wait_until(lambda: event_loop.starts, "the loop's first cycle")
    yield event_loop
    event_loop.stop.set()
    event_loop.trigger.fire("the test ended")
    thread.join(60)
    assert not thread.is_alive()


def _binding_start(loop: EventLoop, namespace: str, pod: str) -> int:
    """The index of the loop's first cycle that bound something after the pod was reported."""
    for i, start in enumerate(loop.starts):
        if any(f"{namespace}/{pod}" in reason for reason in start.reasons):
            return i
    raise AssertionError(f"no cycle started for {namespace}/{pod}: {[s.reasons for s in loop.starts]}")


def test_a_new_pending_pod_starts_a_cycle_that_binds_it(
    cluster: Cluster, loop: EventLoop, namespace: str, nodes: Nodes, scheduler_name: str
) -> None:
    core = cluster.core
    node = nodes.kwok("gpu")
    labels = {"kai.scheduler/queue": "team-a"}
    first = loop.starts[0]
    assert first.reasons == ["the scheduler started"] and first.cycle is not None
    wait_until(lambda: loop.idle, "the loop idle (the node's own events taken)")
    before = len(loop.starts)
    core.create_namespaced_pod(namespace, pod_body("train", scheduler_name, gpus=2, labels=labels))

    bound = wait_until(lambda: core.read_namespaced_pod("train", namespace).spec.node_name, "the pod bound")
    assert bound == node
    # The next cycle after the idle loop was started by the pod's ADDED event (the periodic one is
    # an hour away), and it bound the pod.
    wait_until(lambda: len(loop.starts) > before, "that cycle recorded")
    start = loop.starts[before]
    assert f"pods added: {namespace}/train" in start.reasons and PERIODIC not in start.reasons, start
    assert start.cycle is not None and start.cycle.allocated_count == 1, start

    # The bind's own MODIFIED events and KWOK's start of the pod ask for no cycle: they come before
    # a second pod's ADDED event on the same watch, and no cycle is started for "train" again.
    wait_until(lambda: core.read_namespaced_pod("train", namespace).status.phase == "Running", "KWOK runs it")
    core.create_namespaced_pod(namespace, pod_body("second", scheduler_name, gpus=2, labels=labels))
    wait_until(lambda: core.read_namespaced_pod("second", namespace).spec.node_name, "the second pod bound")
    wait_until(lambda: _started_for(loop, namespace, "second"), "the cycle for the second pod recorded")
    later = [s.reasons for s in loop.starts[before + 1 :]]
    assert not [r for reasons in later for r in reasons if f"{namespace}/train" in r], later


def test_a_deleted_pod_frees_room_for_a_pending_one_at_once(
    cluster: Cluster, loop: EventLoop, namespace: str, nodes: Nodes, scheduler_name: str
) -> None:
    core = cluster.core
    node = nodes.kwok("gpu", gpus=4)
    labels = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("holder", scheduler_name, gpus=4, labels=labels))
    wait_until(lambda: core.read_namespaced_pod("holder", namespace).spec.node_name == node, "holder bound")
    core.create_namespaced_pod(namespace, pod_body("waiter", scheduler_name, gpus=4, labels=labels))
    i = wait_until(lambda: _started_for(loop, namespace, "waiter"), "a cycle for the waiter")
    # The node is full: that cycle leaves the waiter pending.
    assert loop.starts[i - 1].cycle is not None
    assert not core.read_namespaced_pod("waiter", namespace).spec.node_name

    core.delete_namespaced_pod("holder", namespace, grace_period_seconds=0)
    wait_until(lambda: core.read_namespaced_pod("waiter", namespace).spec.node_name == node, "waiter bound")
    j = wait_until(lambda: _started_for(loop, namespace, "holder", kind="deleted"), "the cycle it started")
    assert j > i, [s.reasons for s in loop.starts]
    # The deletion started a cycle, and the waiter was bound by a cycle after its first one that
    # was not the periodic cycle an hour away: the deletion's own, one its own writes started (a
    # bind refused once, say), or one started just before the deletion was recorded as a reason
    # whose observe already read it from the watch cache (a cycle for the waiter's own status
    # write: the likely cause of a timeout seen once in CI while the slice began at the deletion's).
    try:
        after = wait_until(lambda: _through_first_bind(loop.starts[i:]), "the cycle that bound the waiter")
    except AssertionError as timed_out:  # say what each cycle since was started for and decided
        raise AssertionError(f"{timed_out}: {_said(loop.starts[i:])}") from None
    assert all(PERIODIC not in s.reasons for s in after), _said(after)


def _through_first_bind(starts: list[CycleStart]) -> list[CycleStart] | None:
    """The starts up to the first whose cycle bound a pod; None while none has."""
    for n, start in enumerate(starts):
        if start.cycle is not None and start.cycle.allocated_count:
            return starts[: n + 1]
    return None


def _said(starts: list[CycleStart]) -> list[tuple[object, ...]]:
    """What each cycle was started for and decided: the failure message says why the first did not bind."""
    said: list[tuple[object, ...]] = []
    for start in starts:
        cycle = start.cycle
        decided = list(cycle.decisions.values_list("pod_name", "kind", "reason", "message")) if cycle else []
        said.append((start.reasons, cycle and cycle.status, cycle and cycle.error, start.error, decided))
    return said


def test_the_loop_writes_the_podgroup_of_a_pod_it_binds(
    cluster: Cluster, podgroup_crd: None, loop: EventLoop, namespace: str, nodes: Nodes,  # noqa: F811
    scheduler_name: str,
) -> None:  # fmt: skip
    """The cycles of the scheduler process read the watches' copy: the PodGroup writer must see the
    pods' groupings and the listed PodGroups there too, as a polled cycle does (it once saw neither,
    so under ``run_scheduler`` no PodGroup was ever written)."""
    core = cluster.core
    nodes.kwok("gpu")
    body = pod_body("solo", scheduler_name, gpus=1, labels={"kai.scheduler/queue": "team-a"})
    uid = core.create_namespaced_pod(namespace, body).metadata.uid
    wait_until(lambda: core.read_namespaced_pod("solo", namespace).spec.node_name, "the pod bound")

    name = f"pg-solo-{uid}"
    group = wait_until(lambda: pod_groups(cluster, namespace).get(name), f"PodGroup {name}")
    assert group["spec"]["queue"] == "team-a" and group["spec"]["minMember"] == 1, group["spec"]
    def allocated() -> Any:
        status = pod_groups(cluster, namespace)[name].get("status") or {}
        return (status.get("resourcesStatus") or {}).get("allocated")

    allocated_now = wait_until(allocated, "the PodGroup's allocated resources")
    assert allocated_now["nvidia.com/gpu"] in ("1", 1), allocated_now


def _started_for(loop: EventLoop, namespace: str, pod: str, kind: str = "added") -> int:
    """1 + the index of the first finished cycle started for the pod's event (0: none yet)."""
    for i, start in enumerate(list(loop.starts)):
        if f"pods {kind}: {namespace}/{pod}" in start.reasons:
            return i + 1
    return 0
