"""Shards (issue 30): each node pool is scheduled by its own cycle, under its own lock.

A pool's cycle reads and writes only its own pool's rows, takes its own Redis lock and fencing
token, and runs beside the other pools' cycles: in parallel, never waiting for another pool's
lock, and on time while another pool's cycle fails or is slow. The decisions are those of the
whole-cluster cycle (the engine schedules each pool on its own either way).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import connection

import scheduler
from kai_portal.history.models import Decision, QueueStatus, SchedulingCycle
from kai_portal.nodes.models import NodePool
from kai_portal.scheduling import lock
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.workloads.models import Job, Pod
from kai_portal.workloads.simulated_cluster import RowBackend
from tests.portal import factories
from tests.portal.scheduling.conftest import T0

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def free_pool_locks() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    for pool in ("a", "b"):
        client.delete(lock.lock_name(pool))
    client.close()


def two_pools() -> tuple[Job, Job]:
    """Pools ``a`` and ``b``, two 2-GPU nodes each, a queue in each and a job waiting in each."""
    for pool in ("a", "b"):
        factories.node(f"{pool}1", pool=pool, gpus=2)
        factories.node(f"{pool}2", pool=pool, gpus=2)
    queue_a = factories.queue("team-a", node_pool=NodePool.objects.get(name="a"), gpu_quota=4)
    queue_b = factories.queue("team-b", node_pool=NodePool.objects.get(name="b"), gpu_quota=4)
    return factories.job(queue_a, "train-a", task_count=2), factories.job(queue_b, "train-b", task_count=3)


@pytest.mark.django_db
def test_a_pools_cycle_schedules_its_pool_and_writes_nothing_of_another():
    job_a, job_b = two_pools()
    cycle = run_scheduling_cycle(now=T0, pool="a")

    assert cycle.status == "succeeded" and cycle.pool == "a"
    assert {p.state for p in job_a.pods.all()} == {"bound"}
    assert {p.node.pool.name for p in job_a.pods.all()} == {"a"}
    # Pool b's job: untouched (no decision, no reason, no message, no queue status).
    assert {(p.state, p.reason) for p in job_b.pods.all()} == {("pending", "")}
    assert not Decision.objects.filter(job=job_b).exists()
    assert set(QueueStatus.objects.values_list("queue__name", flat=True)) == {"team-a"}

    other = run_scheduling_cycle(now=T0, pool="b")
    assert other.status == "succeeded" and other.pool == "b"
    assert {p.state for p in job_b.pods.all()} == {"bound"}
    assert {p.node.pool.name for p in job_b.pods.all()} == {"b"}


@pytest.mark.django_db
def test_pool_cycles_decide_as_the_whole_cluster_cycle_does():
    """Two pools, more work than room in each: the pool cycles bind exactly what the engine's
    whole-cluster cycle places."""
    two_pools()
    queue_a = Job.objects.get(name="train-a").queue
    factories.job(queue_a, "wide-a", task_count=3)
    factories.job(Job.objects.get(name="train-b").queue, "small-b", task_count=1)
    inp = build_snapshot(T0)
    whole = scheduler.run_cycle(inp.snapshot, inp.config)
    expected = {
        inp.index.tasks[key].name: o.node
        for key, o in whole.tasks.items()
        if o.status == scheduler.TaskState.ALLOCATED
    }

    for pool in ("a", "b"):
        assert run_scheduling_cycle(now=T0, pool=pool).status == "succeeded"

    bound = dict(Pod.objects.filter(state="bound").values_list("name", "node__name"))
    assert bound == expected
    # Every GPU of both pools taken (4 + 4), none of a pod bound across pools.
    assert len(bound) == 8
    assert all(node[0] == name.split("-")[1][0] for name, node in bound.items())


@pytest.mark.django_db
def test_one_pools_lock_held_does_not_stop_another_pools_cycle():
    job_a, job_b = two_pools()
    other = redis.Redis.from_url(settings.REDIS_URL)
    held = other.lock(lock.lock_name("a"), timeout=30)
    assert held.acquire(blocking=False)
    try:
        cycle_a = run_scheduling_cycle(now=T0, pool="a")
        cycle_b = run_scheduling_cycle(now=T0, pool="b")
        # The whole-cluster lock is another lock too: a pool cycle never takes it.
        whole_free = other.lock(lock.LOCK_NAME, timeout=30)
        assert whole_free.acquire(blocking=False)
        whole_free.release()
    finally:
        held.release()
        other.close()

    assert (cycle_a.status, cycle_a.pool) == ("skipped", "a")
    assert (cycle_b.status, cycle_b.pool) == ("succeeded", "b")
    assert {p.state for p in job_b.pods.all()} == {"bound"}
    assert {p.state for p in job_a.pods.all()} == {"pending"}


class Timed(RowBackend):
    """The rows' cluster, with each cycle's observe taking ``delay`` seconds (or raising), its
    wall-clock interval recorded: how the tests see two cycles overlap."""

    def __init__(self, *, delay: float = 0.0, fail: bool = False) -> None:
        super().__init__()
        self.delay, self.fail = delay, fail
        self.intervals: list[tuple[float, float]] = []

    def observe(self):  # type: ignore[no-untyped-def]
        started = time.monotonic()
        time.sleep(self.delay)
        try:
            if self.fail:
                raise RuntimeError("poisoned: this pool's cycle fails")
            return super().observe()
        finally:
            self.intervals.append((started, time.monotonic()))


def _in_thread(target, *args) -> threading.Thread:  # type: ignore[no-untyped-def]
    def run() -> None:
        try:
            target(*args)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.postgres_only("two cycles in parallel on one database: SQLite has one writer")
@pytest.mark.django_db(transaction=True)
def test_two_pools_cycles_run_at_the_same_time():
    two_pools()
    backends = {"a": Timed(delay=1.0), "b": Timed(delay=1.0)}
    statuses: dict[str, str] = {}
    start = threading.Barrier(2)

    def cycle(pool: str) -> None:
        start.wait()
        statuses[pool] = run_scheduling_cycle(pool=pool, backend=backends[pool]).status

    for thread in [_in_thread(cycle, "a"), _in_thread(cycle, "b")]:
        thread.join()

    assert statuses == {"a": "succeeded", "b": "succeeded"}
    (a_start, a_end), (b_start, b_end) = backends["a"].intervals[0], backends["b"].intervals[0]
    assert a_start < b_end and b_start < a_end, "the two pools' cycles did not overlap"
    assert Pod.objects.filter(state="bound").count() == 5


def _loop(pool: str, backend: Timed, cycles: int, period: float, out: list[tuple[float, str]]) -> None:
    """A pool's loop as beat runs it: a cycle every ``period`` s, each started on time."""
    for i in range(cycles):
        time.sleep(max(0.0, out_start + i * period - time.monotonic()))
        try:
            status = run_scheduling_cycle(pool=pool, backend=backend).status
        except RuntimeError:
            status = "failed"
        out.append((time.monotonic(), status))


out_start = 0.0


SLOW = 4.0  # seconds pool a's slow cycle takes
LATE = 2.0  # how late pool b's cycle may end on a loaded machine; being blocked by a is SLOW late


@pytest.mark.postgres_only("two cycles in parallel on one database: SQLite has one writer")
@pytest.mark.django_db(transaction=True)
def test_a_failing_or_slow_pool_leaves_the_other_pools_cycles_on_time():
    """Pool a's cycle fails twice, then takes 4 s: pool b's cycles, one a second all along, each
    end within 2 s of their slot (waiting for a's lock or transactions would make one 4 s late)."""
    global out_start
    job_a, job_b = two_pools()
    failing, slow, healthy = Timed(fail=True), Timed(delay=SLOW), Timed()
    done_a: list[tuple[float, str]] = []
    done_b: list[tuple[float, str]] = []
    out_start = time.monotonic()

    def pool_a() -> None:
        _loop("a", failing, 2, 1.0, done_a)
        _loop("a", slow, 1, 0.0, done_a)

    threads = [_in_thread(pool_a), _in_thread(_loop, "b", healthy, 7, 1.0, done_b)]
    for thread in threads:
        thread.join()

    assert [status for _t, status in done_a] == ["failed", "failed", "succeeded"]
    assert [status for _t, status in done_b] == ["succeeded"] * 7
    slow_start, slow_end = slow.intervals[0]
    assert any(slow_start < out_start + i < slow_end for i in range(7)), (
        "no cycle of b ran beside a's slow one"
    )
    for i, (ended, _status) in enumerate(done_b):
        assert ended - (out_start + i) < LATE, f"pool b's cycle {i} ended late: pool a delayed it"
    assert SchedulingCycle.objects.filter(pool="a", status="failed").count() == 2
    assert "poisoned" in SchedulingCycle.objects.filter(pool="a", status="failed").first().error
    assert {p.state for p in job_b.pods.all()} == {"running"}


@pytest.mark.django_db
def test_a_poisoned_row_in_one_pool_fails_that_pools_cycle_only(monkeypatch):
    """A row that makes the cycle raise while it persists (here: a queue status write that
    fails for pool a's queue) fails pool a's cycle; pool b's cycle succeeds beside it."""
    job_a, job_b = two_pools()
    from kai_portal.scheduling import usage

    real = usage.record_usage

    def poisoned(cycle, queue_ids, outcomes, now):  # type: ignore[no-untyped-def]
        if "team-a" in queue_ids:
            raise ValueError("poisoned row in pool a")
        return real(cycle, queue_ids, outcomes, now)

    monkeypatch.setattr(usage, "record_usage", poisoned)
    with pytest.raises(ValueError):
        run_scheduling_cycle(now=T0, pool="a")
    assert run_scheduling_cycle(now=T0, pool="b").status == "succeeded"
    assert {p.state for p in job_a.pods.all()} == {"pending"}  # rolled back
    assert {p.state for p in job_b.pods.all()} == {"bound"}


def _worker_env() -> dict[str, str]:
    db = settings.DATABASES["default"]
    auth = f"{db['USER']}:{db['PASSWORD']}" if db.get("PASSWORD") else db["USER"]
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kai_portal.settings_test",
        "TEST_DATABASE_URL": f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "TEST_REDIS_URL": settings.CELERY_BROKER_URL,
        # Each cycle pauses 2 s between planning and persisting: long enough to see two overlap.
        "KAI_TEST_CYCLE_PAUSE_SECONDS": "2",
        "SCHEDULING_SHARDS": "1",
    }


def _wait_for_workers(sender: Celery, count: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if len(sender.control.ping(timeout=1.0)) >= count:
            return
    raise AssertionError(f"{count} Celery workers did not start within 90 s")


@pytest.mark.postgres_only("the Celery worker and beat are the production path, which runs on PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_two_celery_workers_run_two_pools_cycles_in_parallel():
    """Beat's tick (``run_pool_cycles``) fans out one ``run_cycle(pool)`` per pool; two worker
    processes (prefetch 1) take one each and both cycles run at once."""
    two_pools()
    # A sender of its own on this test's broker, as beat is (the portal's app may have been
    # configured by another test's settings).
    sender = Celery("shards-test", broker=settings.CELERY_BROKER_URL)
    with sender.connection_for_write() as conn:
        for queue in ("scheduling", "default"):
            conn.default_channel.queue_purge(queue)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "kai_portal",
                "worker",
                "--pool=solo",
                "-n",
                f"shard{i}@%h",
                "-Q",
                "scheduling",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "warning",
            ],
            cwd=ROOT,
            env=_worker_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in range(2)
    ]
    try:
        _wait_for_workers(sender, 2)  # both listening before the tasks go out (they expire in a period)
        sender.send_task("kai_portal.scheduling.tasks.run_pool_cycles", queue="scheduling")
        deadline = time.monotonic() + 90
        finished = SchedulingCycle.objects.exclude(status="running")
        while time.monotonic() < deadline and finished.count() < 2:
            time.sleep(0.2)
        connection.close()
        cycles = {c.pool: c for c in SchedulingCycle.objects.all()}
    finally:
        sender.close()
        outputs = []
        for worker in workers:
            worker.terminate()
            outputs.append(worker.communicate(timeout=30)[0].decode())
    assert {pool: c.status for pool, c in cycles.items()} == {"a": "succeeded", "b": "succeeded"}, outputs
    a, b = cycles["a"], cycles["b"]
    assert a.started_at < b.finished_at and b.started_at < a.finished_at, "the cycles ran one after the other"
    assert Pod.objects.filter(state="bound").count() == 5


def test_the_fan_out_sends_one_cycle_per_pool_with_a_node_or_queue(db, monkeypatch):
    """``run_pool_cycles`` (beat's tick with SCHEDULING_SHARDS): one ``run_cycle(pool)`` per pool,
    routed to the scheduling queue and expiring after a period."""
    from kai_portal.scheduling import tasks

    two_pools()
    NodePool.objects.create(name="empty")  # no node, no queue: no cycle
    sent: list[tuple[dict[str, object], dict[str, object]]] = []
    monkeypatch.setattr(tasks.run_cycle, "apply_async", lambda kwargs, **opts: sent.append((kwargs, opts)))
    assert tasks.run_pool_cycles() == ["a", "b"]
    period = float(settings.CYCLE_SECONDS)
    assert sent == [({"pool": pool}, {"queue": "scheduling", "expires": period}) for pool in ("a", "b")]
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1


@pytest.mark.django_db
def test_each_pools_cycle_health_shows_in_metrics_and_on_the_overview(monkeypatch, settings, portal_admin):
    """Pool a's cycle fails (its error named), pool b's succeeds: /metrics and the cluster
    overview say so per pool, and the cluster-wide cycle counters count both."""
    from django.test import Client
    from django.utils import timezone

    from tests.portal.monitoring.conftest import parse

    settings.METRICS_PUBLIC = True
    two_pools()
    from kai_portal.scheduling import usage

    real = usage.record_usage

    def poisoned(cycle, queue_ids, outcomes, now):  # type: ignore[no-untyped-def]
        if "team-a" in queue_ids:
            raise ValueError("poisoned row in pool a")
        return real(cycle, queue_ids, outcomes, now)

    monkeypatch.setattr(usage, "record_usage", poisoned)
    now = timezone.now()
    with pytest.raises(ValueError):
        run_scheduling_cycle(now=now, pool="a")
    ok = run_scheduling_cycle(now=now, pool="b")

    _types, samples = parse(Client().get("/metrics", HTTP_HOST="10.1.2.3:8000").content.decode())
    assert samples[("kai_portal_pool_cycles_total", (("outcome", "failed"), ("pool", "a")))] == 1.0
    assert samples[("kai_portal_pool_cycles_total", (("outcome", "succeeded"), ("pool", "b")))] == 1.0
    assert samples[("kai_portal_cycles_total", (("outcome", "failed"),))] == 1.0
    assert samples[("kai_portal_cycles_total", (("outcome", "succeeded"),))] == 1.0
    assert samples[("kai_portal_pool_failed_cycles_last_hour", (("pool", "a"),))] == 1.0
    assert samples[("kai_portal_pool_failed_cycles_last_hour", (("pool", "b"),))] == 0.0
    finished = samples[("kai_portal_pool_last_cycle_finished_timestamp_seconds", (("pool", "b"),))]
    assert abs(finished - (ok.started_at.timestamp() + ok.duration_ms / 1000)) < 0.01
    assert ("kai_portal_pool_last_cycle_finished_timestamp_seconds", (("pool", "a"),)) not in samples

    browser = Client()
    browser.force_login(portal_admin)
    page = browser.get("/cluster/").content.decode()
    table = page.split('data-testid="pool-cycle-health"')[1].split("</table>")[0]
    row_a, row_b = table.split("<strong>a</strong>")[1], table.split("<strong>b</strong>")[1]
    assert "ValueError: poisoned row in pool a" in row_a.split("</tr>")[0]
    assert "never" in row_a.split("</tr>")[0] and "behind" in row_a.split("</tr>")[0]
    assert "state-succeeded" in row_b.split("</tr>")[0] and "behind" not in row_b.split("</tr>")[0]


@pytest.mark.postgres_only("two cycles in parallel on one database: SQLite has one writer")
@pytest.mark.django_db(transaction=True)
def test_run_scheduler_runs_one_loop_per_pool_with_shards_on(settings):
    """``manage.py run_scheduler`` with SCHEDULING_SHARDS: a loop per pool, each cycle its pool's."""
    from io import StringIO

    from django.core.management import call_command

    settings.SCHEDULING_SHARDS = True
    job_a, job_b = two_pools()
    out = StringIO()
    call_command("run_scheduler", cycles=1, interval=0.1, stdout=out)

    assert sorted(SchedulingCycle.objects.values_list("pool", "status")) == [
        ("a", "succeeded"),
        ("b", "succeeded"),
    ]
    assert "(a) succeeded" in out.getvalue() and "(b) succeeded" in out.getvalue()
    assert Pod.objects.filter(state="bound").count() == 5


@pytest.mark.django_db
def test_a_job_asking_for_another_pool_is_that_pools_and_told_as_the_whole_cycle_tells_it():
    """A job of pool a's queue whose selector names pool b is judged by b's cycle (as the engine
    puts it in b's shard), with the whole-cluster cycle's words; a's cycle leaves it alone."""
    two_pools()
    queue_a = Job.objects.get(name="train-a").queue
    lost = factories.job(queue_a, "lost", node_selector={"kai.scheduler/node-pool": "b"})
    inp = build_snapshot(T0)
    whole = scheduler.run_cycle(inp.snapshot, inp.config)
    key = next(k for k, ref in inp.index.jobs.items() if ref.job_id == lost.pk)
    expected = inp.index.text(whole.job_messages[key])
    assert "QueueDoesNotExist" in expected or "team-a" in expected

    run_scheduling_cycle(now=T0, pool="a")
    lost.refresh_from_db()
    assert lost.message == "" and not Decision.objects.filter(job=lost).exists()
    cycle_b = run_scheduling_cycle(now=T0, pool="b")
    lost.refresh_from_db()
    assert lost.message == expected
    assert set(Decision.objects.filter(job=lost).values_list("cycle__pool", flat=True)) == {"b"}
    assert cycle_b.status == "succeeded"


def test_shards_on_make_beat_fan_out_and_need_the_scheduler_process_in_kubernetes_mode(
    tmp_path: Path,
) -> None:
    """SCHEDULING_SHARDS: beat's cycle entry becomes the fan-out; with the Kubernetes backend the
    settings refuse Celery's loop (a pool the portal has no row of would never be scheduled),
    naming the settings and what to do, and accept the scheduler process (one per pool)."""
    from tests.portal.test_settings import _manage

    key = {"SECRET_KEY": "x7!Qp2-production-like-secret-key-with-enough-entropy-0123456789"}
    show = (
        "from django.conf import settings as s; print(s.CELERY_BEAT_SCHEDULE['run-scheduling-cycle']['task'])"
    )
    on = _manage(["shell", "-c", show], {**key, "SCHEDULING_SHARDS": "1"}, tmp_path)
    assert on.stdout.strip().splitlines()[-1] == "kai_portal.scheduling.tasks.run_pool_cycles", on.stderr
    off = _manage(["shell", "-c", show], key, tmp_path)
    assert off.stdout.strip().splitlines()[-1] == "kai_portal.scheduling.tasks.run_cycle", off.stderr
    kubernetes = {**key, "SCHEDULING_SHARDS": "1", "CLUSTER_BACKEND": "kubernetes"}
    refused = _manage(["check"], kubernetes, tmp_path)
    assert refused.returncode != 0
    assert (
        "SCHEDULING_SHARDS=1 with CLUSTER_BACKEND=kubernetes needs SCHEDULING_LOOP=process" in refused.stderr
    )
    shown = "from django.conf import settings as s; print(s.SCHEDULING_SHARDS, s.SCHEDULING_LOOP)"
    accepted = _manage(["shell", "-c", shown], {**kubernetes, "SCHEDULING_LOOP": "process"}, tmp_path)
    assert accepted.stdout.strip().splitlines()[-1] == "True process", accepted.stderr


@pytest.mark.django_db(transaction=True)
def test_run_scheduler_pool_runs_that_pools_cycles_only_and_needs_shards_on(settings):
    """``run_scheduler --pool a``: one scheduler per pool (KAI's SchedulingShard); without
    SCHEDULING_SHARDS it is refused, naming the setting (a pool's scheduler beside a whole-cluster
    one would bind the same pods), and runs nothing."""
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    two_pools()
    settings.SCHEDULING_SHARDS = False
    with pytest.raises(CommandError, match="--pool needs SCHEDULING_SHARDS=1"):
        call_command("run_scheduler", pool=["a"], once=True, stdout=StringIO())
    assert not SchedulingCycle.objects.exists()
    settings.SCHEDULING_SHARDS = True
    out = StringIO()
    call_command("run_scheduler", pool=["a"], cycles=2, interval=0.05, stdout=out)
    assert list(SchedulingCycle.objects.values_list("pool", "status")) == [("a", "succeeded")] * 2
    assert "scheduling node pool(s) a, each on its own" in out.getvalue()
    assert set(
        Pod.objects.exclude(state="pending").values_list("job__queue__node_pool__name", flat=True)
    ) == {"a"}
