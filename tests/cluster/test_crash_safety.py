"""Binding that survives a crash (issue 16): a worker killed with SIGKILL in the middle of binding a
gang leaves a state the next cycle completes, on a real API server.

KAI binds a gang's pods one by one too (its binder is a separate process); what keeps a gang from
staying half-bound is that the next cycle sees the bound pods as the gang's running members and
places the rest (or, past the stale-gang grace period, evicts the remainder). The worker here is a
real process (``python -c`` with the test's settings, database, Redis and kubeconfig) whose backend
stops after two of the gang's four binds; the test kills it there, so nothing in it cleans up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from kai_portal.history.models import Decision, SchedulingCycle
from kai_portal.scheduling.cycle import ABANDONED, run_scheduling_cycle
from kai_portal.workloads.models import Job

from .conftest import Cluster, Nodes, wait_until
from .test_portal_schedules_kwok import _job_body

pytestmark = pytest.mark.django_db(transaction=True)
LOCK_TIMEOUT = 3  # CYCLE_LOCK_TIMEOUT_SECONDS for both workers (the least it may be)

# The killed worker: the production cycle, with a backend that stops for good after N binds.
WORKER = textwrap.dedent(
    """
    import threading
    import time
    from pathlib import Path

    import django

    django.setup()
    from kai_portal.cluster.backends.kubernetes.binder import Binder
    from kai_portal.scheduling.cycle import run_scheduling_cycle

    bind, lock, started, done = Binder.bind, threading.Lock(), [], []

    # Binds go out on a pool (bind_concurrency): only the first N may reach the API server, the
    # rest wait here until the kill, so exactly N are bound whether binds run in series or not;
    # the Nth hangs after its bind, before its Scheduled event.
    def bind_then_hang(self, request):
        with lock:
            go = len(started) < {binds}
            if go:
                started.append(request)
        if not go:
            time.sleep(300)
        result = bind(self, request)
        with lock:
            done.append(result.ok)
            last = sum(done) == {binds}
            if last:
                Path({marker!r}).write_text("bound")
        if last:
            time.sleep(300)
        return result

    Binder.bind = bind_then_hang
    run_scheduling_cycle()
    """
)


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def _worker_env(scheduler_name: str) -> dict[str, str]:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "kai_portal.settings_test",
            "TEST_DATABASE_URL": _database_url(), "TEST_REDIS_URL": settings.REDIS_URL,
            "CLUSTER_BACKEND": "kubernetes", "SCHEDULER_NAME": scheduler_name,
            "CYCLE_LOCK_TIMEOUT_SECONDS": str(LOCK_TIMEOUT), "FORECAST_AFTER_CYCLE": "0"}  # fmt: skip


class HalfBound:
    """A 4-pod gang (batch-min-member 4, 3 GPUs a pod, two 8-GPU nodes) left with 2 pods bound by a
    worker killed in the middle of its apply."""

    def __init__(self, cluster: Cluster, namespace: str, scheduler_name: str, nodes: Nodes,
                 settings: Any, tmp_path: Path) -> None:  # fmt: skip
        self.core, self.namespace = cluster.core, namespace
        settings.CYCLE_LOCK_TIMEOUT_SECONDS = LOCK_TIMEOUT
        self.nodes = [nodes.kwok("gpu-a"), nodes.kwok("gpu-b")]
        job = _job_body("gang", scheduler_name, "team-a")
        job["metadata"]["annotations"] = {"kai.scheduler/batch-min-member": "4"}
        job["spec"].update(completions=4, parallelism=4)
        job["spec"]["template"]["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
        cluster.batch.create_namespaced_job(namespace, job)
        wait_until(lambda: len(self.pods()) == 4, "the Job controller's 4 pods")

        marker = tmp_path / "marker"
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER.format(binds=2, marker=str(marker))],
            env=_worker_env(scheduler_name), cwd=settings.BASE_DIR,
        )  # fmt: skip
        try:
            wait_until(lambda: marker.exists() or worker.poll() is not None, "the worker to bind 2 pods", 120)
            assert worker.poll() is None, "the worker ended before it was killed"
            os.kill(worker.pid, signal.SIGKILL)
            self.killed = time.monotonic()
            worker.wait(10)
        finally:
            if worker.poll() is None:
                worker.kill()
        self.half = {p.metadata.name for p in self.pods() if p.spec.node_name}
        assert len(self.half) == 2, "the kill should leave the gang half-bound"
        assert SchedulingCycle.objects.get().status == "running"  # the dead worker's row

    def pods(self) -> list[Any]:
        selector = "batch.kubernetes.io/job-name=gang"
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def next_cycle(self, now: datetime | None = None) -> SchedulingCycle:
        """Cycles in this process: skipped while the dead worker's lock lives (its TTL), then one runs."""
        while (cycle := run_scheduling_cycle(now=now)).status == "skipped":
            waited = time.monotonic() - self.killed
            assert waited < LOCK_TIMEOUT + 5, "the dead worker's lock outlived its TTL"
            time.sleep(0.2)
        assert cycle.status == "succeeded", cycle.error
        return cycle


@pytest.mark.postgres_only("the killed worker is the production path: PostgreSQL and the Redis cycle lock")
def test_a_worker_killed_mid_apply_leaves_a_half_bound_gang_the_next_cycle_completes(
    cluster: Cluster, portal: Any, namespace: str, scheduler_name: str, nodes: Nodes,
    settings: Any, tmp_path: Path,
) -> None:  # fmt: skip
    gang = HalfBound(cluster, namespace, scheduler_name, nodes, settings, tmp_path)
    core, pods, half = cluster.core, gang.pods, gang.half

    gang.next_cycle()

    bound = {p.metadata.name: p.spec.node_name for p in pods()}
    assert all(bound.values()), f"the gang is still half-bound after the next cycle: {bound}"
    assert not SchedulingCycle.objects.filter(status="running").exists()
    abandoned = SchedulingCycle.objects.get(error=ABANDONED)
    assert abandoned.status == "failed" and abandoned.finished_at is not None
    # Each pod bound once: no refused (409) bind, no Scheduled event twice. The dead worker was killed
    # between its second bind and that bind's event, so that one pod has none; the rest have one each
    # (the first bind's event ran on another pool thread: it may not have gone out before the kill).
    on_pods = [e for e in core.list_namespaced_event(namespace).items if e.involved_object.kind == "Pod"]
    assert {(e.reason, e.count) for e in on_pods} <= {("Scheduled", 1), ("Bound", 1)}  # Bound: KAI's binder's
    events = [e for e in on_pods if e.reason == "Scheduled"]
    assert {(e.reason, e.count) for e in events} == {("Scheduled", 1)}
    scheduled = Counter(e.involved_object.name for e in events)
    assert set(scheduled.values()) == {1} and len(scheduled) in (2, 3)
    assert set(bound) - half <= set(scheduled), "a pod the next cycle bound has no Scheduled event"
    row = Job.objects.get(cluster_key=f"{namespace}/Job/gang")
    assert {p.state for p in row.pods.all()} <= {"bound", "running"}  # KWOK runs the first two already


@pytest.mark.postgres_only("the killed worker is the production path: PostgreSQL and the Redis cycle lock")
def test_a_half_bound_gang_that_cannot_complete_is_evicted_whole_after_the_stale_grace_period(
    cluster: Cluster, portal: Any, namespace: str, scheduler_name: str, nodes: Nodes,
    settings: Any, tmp_path: Path,
) -> None:  # fmt: skip
    """KAI's stale gang eviction: a gang below its minimum (2 of 4 running) that cannot be completed
    is StaleJob at once and, after the 60 s grace period, its remaining pods are evicted, so no
    half-bound gang holds GPUs for longer than the grace period."""
    gang = HalfBound(cluster, namespace, scheduler_name, nodes, settings, tmp_path)
    core = cluster.core
    for node in gang.nodes:  # cordoned: the other two pods fit nowhere now
        core.patch_node(node, {"spec": {"unschedulable": True}})

    start = timezone.now()
    gang.next_cycle(start)
    assert {p.metadata.name for p in gang.pods() if p.spec.node_name} == gang.half  # within the grace
    group = f"{namespace}/Job/gang"
    row = Job.objects.get(cluster_key=group)
    assert row.stale_since is not None
    assert not Decision.objects.filter(kind="evicted").exists()

    gang.next_cycle(start + timedelta(seconds=61))  # the cycle's clock: past KAI's 60 s default grace

    events = [e for e in core.list_namespaced_event(namespace).items if e.reason == "Evict"]
    assert sorted(e.involved_object.name for e in events) == sorted(gang.half)
    for event in events:
        assert event.message == (
            "Workload doesn't meet the minimum required number of pods (4), evicting remaining pod: "
            f"{namespace}/{event.involved_object.name}")  # fmt: skip
        assert event.metadata.annotations["evictor-action-type"] == "stale-gang"

    def evicted() -> bool:
        pods = gang.pods()
        return not [p for p in pods if p.metadata.name in gang.half and p.metadata.deletion_timestamp is None]

    wait_until(evicted, "the evicted pods to be deleted")
    assert not any(p.spec.node_name and p.metadata.deletion_timestamp is None for p in gang.pods())
