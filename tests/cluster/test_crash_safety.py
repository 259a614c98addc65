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
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from kai_portal.scheduling.cycle import ABANDONED, run_scheduling_cycle
from kai_portal.scheduling.models import SchedulingCycle
from kai_portal.workloads.models import Job

from .conftest import Cluster, Nodes, wait_until
from .test_portal_schedules_kwok import _job_body, portal  # noqa: F401  (the portal fixture)

pytestmark = pytest.mark.django_db(transaction=True)
LOCK_TIMEOUT = 3  # CYCLE_LOCK_TIMEOUT_SECONDS for both workers (the least it may be)

# The killed worker: the production cycle, with a backend that stops for good after N binds.
WORKER = textwrap.dedent(
    """
    import time
    from pathlib import Path

    import django

    django.setup()
    from kai_portal.cluster.backends.kubernetes import KubernetesBackend
    from kai_portal.scheduling.cycle import run_scheduling_cycle

    bind, done = KubernetesBackend._bind, []

    def bind_then_hang(self, request):
        result = bind(self, request)
        done.append(result.ok)
        if sum(done) == {binds}:
            Path({marker!r}).write_text("bound")
            time.sleep(300)
        return result

    KubernetesBackend._bind = bind_then_hang
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


@pytest.mark.postgres_only("the killed worker is the production path: PostgreSQL and the Redis cycle lock")
def test_a_worker_killed_mid_apply_leaves_a_half_bound_gang_the_next_cycle_completes(
    cluster: Cluster, portal: Any, namespace: str, scheduler_name: str, nodes: Nodes,  # noqa: F811
    settings: Any, tmp_path: Path,
) -> None:  # fmt: skip
    core, batch = cluster.core, cluster.batch
    settings.CYCLE_LOCK_TIMEOUT_SECONDS = LOCK_TIMEOUT
    nodes.kwok("gpu-a")
    nodes.kwok("gpu-b")
    job = _job_body("gang", scheduler_name, "team-a")  # 4 pods of 3 GPUs: both nodes
    job["metadata"]["annotations"] = {"kai.scheduler/batch-min-member": "4"}
    job["spec"].update(completions=4, parallelism=4)
    job["spec"]["template"]["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
    batch.create_namespaced_job(namespace, job)
    selector = "batch.kubernetes.io/job-name=gang"

    def pods() -> list[Any]:
        return list(core.list_namespaced_pod(namespace, label_selector=selector).items)

    wait_until(lambda: len(pods()) == 4, "the Job controller's 4 pods")

    marker = tmp_path / "marker"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER.format(binds=2, marker=str(marker))],
        env=_worker_env(scheduler_name), cwd=settings.BASE_DIR,
    )  # fmt: skip
    try:
        wait_until(lambda: marker.exists() or worker.poll() is not None, "the worker to bind 2 pods", 120)
        assert worker.poll() is None, "the worker ended before it was killed"
        os.kill(worker.pid, signal.SIGKILL)
        killed = time.monotonic()
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
    half = {p.metadata.name for p in pods() if p.spec.node_name}
    assert len(half) == 2, "the kill should leave the gang half-bound"
    assert SchedulingCycle.objects.get().status == "running"  # the dead worker's row

    # The next cycles, in this process: skipped while the dead worker's lock lives (its TTL), then one runs.
    while (cycle := run_scheduling_cycle()).status == "skipped":
        assert time.monotonic() - killed < LOCK_TIMEOUT + 5, "the dead worker's lock outlived its TTL"
        time.sleep(0.2)
    assert cycle.status == "succeeded", cycle.error

    bound = {p.metadata.name: p.spec.node_name for p in pods()}
    assert all(bound.values()), f"the gang is still half-bound after the next cycle: {bound}"
    assert not SchedulingCycle.objects.filter(status="running").exists()
    abandoned = SchedulingCycle.objects.get(error=ABANDONED)
    assert abandoned.status == "failed" and abandoned.finished_at is not None
    # Each pod bound once: no refused (409) bind, no Scheduled event twice. The dead worker was killed
    # between its second bind and that bind's event, so that one pod has none; the rest have one each.
    events = [e for e in core.list_namespaced_event(namespace).items if e.involved_object.kind == "Pod"]
    assert {(e.reason, e.count) for e in events} == {("Scheduled", 1)}
    scheduled = Counter(e.involved_object.name for e in events)
    assert set(scheduled.values()) == {1} and len(scheduled) == 3
    assert set(bound) - half <= set(scheduled), "a pod the next cycle bound has no Scheduled event"
    row = Job.objects.get(cluster_key=f"{namespace}/Job/gang")
    assert {p.state for p in row.pods.all()} <= {"bound", "running"}  # KWOK runs the first two already
