"""Page render times with 10,000 pods, the forecast cold and with a live scheduling loop.

Seeds a realistic database (40 nodes x 8 GPUs, a 3-department queue tree with
12 leaf queues, 2,500 jobs x 4 pods = 10,000 pods: 80 jobs running on every
GPU, 1,000 pending with declared durations, the rest finished; 200 scheduling
cycles of decisions for 100 of the pending jobs, a day of per-minute usage
samples per queue and resource, audit entries) and times the main pages with
Django's test client, as a portal admin and as a team member, at 1,000 and at
10 pending jobs (the other 990 finished; still 10,000 pods), each twice:

* cold: no stored forecast (none computed yet) and an empty cache;
* loop: ``manage.py run_scheduler`` running in another process (as ``make
  run`` does), a cycle every 5 s, each followed by the forecast refresh.

Reports the median and p95 of ``--runs`` renders per page after one warm-up,
and what the loop did meanwhile (cycles, their duration, jobs estimated).
Pages never compute the forecast; the loop stores it (``forecast_store``).

    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/kai_bench_pages \\
    TEST_REDIS_URL=redis://127.0.0.1:6379/13 \\
    .venv/bin/python benchmarks/page_render.py [--runs 20]

The database named by TEST_DATABASE_URL (PostgreSQL: dropped and recreated, only if a benchmark
created it, see bench_db.py; or an SQLite file for ``make run``'s database) is always reseeded.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings_test")
os.environ.setdefault("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kai_bench_pages")

NODES, GPUS_PER_NODE = 40, 8
JOBS, PODS_PER_JOB = 2_500, 4
RUNNING_JOBS = NODES * GPUS_PER_NODE // PODS_PER_JOB  # every GPU busy
PENDING_JOBS = 1_000
CYCLES, BLOCKED_JOBS = 200, 100
LOOP_WARMUP_S = 20.0  # the loop runs this long before timing starts (first refreshes done)


def ensure_database() -> None:
    import dj_database_url

    from benchmarks.bench_db import ensure_postgres_database

    if dj_database_url.parse(os.environ["TEST_DATABASE_URL"])["ENGINE"] != "django.db.backends.postgresql":
        return  # SQLite: the file is created on connect
    # Always a fresh schema, in a database the benchmarks made (any other is refused untouched).
    ensure_postgres_database("page_render.py", fresh=True)


def seed() -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from kai_portal.audit.models import AuditEntry
    from kai_portal.history.models import Decision, JobMessage, QueueStatus, SchedulingCycle, UsageSample
    from kai_portal.nodes.models import GpuDevice, Node, NodePool
    from kai_portal.queues.models import Queue
    from kai_portal.teams.models import Membership, Team
    from kai_portal.workloads.models import Job, Pod

    now = timezone.now()
    user_model = get_user_model()
    user_model.objects.create_superuser("admin", "admin@example.com", "pw")
    pool = NodePool.objects.create(name="default")
    nodes = Node.objects.bulk_create(
        Node(name=f"node-{i:03d}", pool=pool, cpu_millicores=128_000, memory_mib=1_048_576)
        for i in range(NODES)
    )
    devices = GpuDevice.objects.bulk_create(
        GpuDevice(node=n, index=g, model="NVIDIA A100-SXM4-80GB", memory_mib=81_920)
        for n in nodes
        for g in range(GPUS_PER_NODE)
    )
    leaves: list[Queue] = []
    for d in range(3):
        dept = Queue(name=f"dept-{d}", gpu_quota=100)
        dept.save()
        for t in range(4):
            slug = f"team-{d}-{t}"
            team = Team(slug=slug, name=f"Team {d}.{t}")
            team.save()
            for u in range(3):
                user = user_model.objects.create_user(f"{slug}-user{u}", password="pw")
                Membership(team=team, user=user, role="admin" if u == 0 else "member").save()
            leaf = Queue(name=f"{slug}-q", parent=dept, team=team, gpu_quota=25)
            leaf.save()
            leaves.append(leaf)
    users = list(user_model.objects.filter(is_superuser=False))
    def state(i: int) -> str:
        if i < RUNNING_JOBS:
            return "running"
        return "pending" if i < RUNNING_JOBS + PENDING_JOBS else "succeeded"

    jobs = Job.objects.bulk_create(
        Job(name=f"job-{i:05d}", queue=leaves[i % len(leaves)], submitter=users[i % len(users)], gpu_count=1,
            task_count=PODS_PER_JOB, min_member=1, priority=50, state=state(i),
            duration=timedelta(hours=1 + i % 8))
        for i in range(JOBS)
    )  # fmt: skip
    pods: list[Pod] = []
    device_iter = iter(devices)
    for job in jobs:
        for k in range(PODS_PER_JOB):
            running = job.state == "running"
            device = next(device_iter, None) if running else None
            pods.append(Pod(job=job, index=k, name=f"{job.name}-{k}",
                            state="running" if running and device else ("pending" if job.state == "pending"
                                                                        else "succeeded"),
                            node=device.node if device else None, reason="",
                            started_at=now - timedelta(minutes=30) if device else None))  # fmt: skip
            if device is not None:
                pods[-1]._device = device
    Pod.objects.bulk_create(pods)
    through = Pod.gpu_devices.through
    through.objects.bulk_create(
        through(pod_id=p.pk, gpudevice_id=p._device.pk) for p in pods if hasattr(p, "_device")
    )
    blocked = [j for j in jobs if j.state == "pending"][:BLOCKED_JOBS]
    blocked_pods = list(Pod.objects.filter(job__in=blocked))
    message = "OverLimit: queue quota has reached the allowable limit of GPUs. Limit is 25 GPUs"
    for c in range(CYCLES):
        at = now - timedelta(seconds=5 * (CYCLES - c))
        cycle = SchedulingCycle.objects.create(
            started_at=at, finished_at=at, status="succeeded", duration_ms=40
        )
        Decision.objects.bulk_create(
            Decision(cycle=cycle, pod=p, job_id=p.job_id, kind="unschedulable", reason="OverLimit",
                     message=message)
            for p in blocked_pods
        )  # fmt: skip
        JobMessage.objects.bulk_create(
            JobMessage(cycle=cycle, job=j, reason="OverLimit", message=message) for j in blocked
        )
    queues = list(Queue.objects.all())
    samples = []
    for minute in range(24 * 60):
        at = now - timedelta(minutes=24 * 60 - minute)
        for q in queues:
            for r in ("gpu", "cpu", "memory"):
                sample = UsageSample(queue=q, resource=r, sampled_at=at, allocated=Decimal(20 + minute % 7))
                sample.requested, sample.deserved, sample.fair_share = Decimal(40), Decimal(25), Decimal(26)
                samples.append(sample)
    UsageSample.objects.bulk_create(samples, batch_size=5000)
    # The loop keeps one current status row per queue and resource (what the queue pages read).
    QueueStatus.objects.bulk_create(
        QueueStatus(queue=q, resource=r, cycle=cycle, deserved=25, fair_share=26, allocated=20, requested=40,
                    updated_at=now)
        for q in queues
        for r in ("gpu", "cpu", "memory")
    )  # fmt: skip
    print(
        f"seeded: {Pod.objects.count()} pods, {Decision.objects.count()} decisions, "
        f"{UsageSample.objects.count()} usage samples, {AuditEntry.objects.count()} audit entries"
    )


Row = tuple[str, str, str, int, float, float, int]  # phase, page, persona, pending, median, p95, status


def p95(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def time_pages(runs: int, phase: str, pending: int) -> list[Row]:
    """Median and p95 render time of each main page, per persona."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from kai_portal.history.models import Decision
    from kai_portal.workloads.models import Job

    logging.getLogger("django.request").setLevel(logging.CRITICAL)
    admin = get_user_model().objects.get(username="admin")
    # A pending job with the seeded decision history (the live loop may have started some of them).
    with_history = Decision.objects.filter(job__state="pending").values_list("job_id", flat=True)
    waiting = Job.objects.filter(state="pending")
    blocked = waiting.filter(pk__in=with_history[:1]).first() or waiting.first()
    assert blocked is not None
    team = blocked.queue.team
    member = get_user_model().objects.get(username=f"{team.slug}-user1")
    pages = [
        ("overview", "/cluster/"),
        ("queue list", "/queues/"),
        ("queue detail", f"/queues/{blocked.queue.name}/?window=day"),
        ("jobs list", "/jobs/"),
        ("jobs list, pending", "/jobs/?state=pending"),
        ("job detail (pending, with history)", f"/jobs/{blocked.uid}/"),
        ("submit form", "/jobs/submit/"),
    ]
    rows: list[Row] = []
    for persona, user in (("admin", admin), ("member", member)):
        client = Client()
        client.force_login(user)
        for name, url in pages:
            response = client.get(url)  # warm-up (templates, connections), not the forecast
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - started) * 1000)
            row = (phase, name, persona, pending, statistics.median(times), p95(times), response.status_code)
            rows.append(row)
            print(f"{phase:5} {pending:5} {name:38} {persona:7} {row[4]:9.1f} {row[5]:9.1f} {row[6]:>4}",
                  flush=True)  # fmt: skip
    return rows


def keep_pending(count: int) -> None:
    """Leave ``count`` pending jobs (the oldest, which include the blocked ones); the rest finish."""
    from kai_portal.history.models import Decision
    from kai_portal.workloads.models import Job, Pod

    pending = list(Job.objects.filter(state="pending").order_by("pk").values_list("pk", flat=True))
    with_history = set(Decision.objects.filter(job_id__in=pending).values_list("job_id", flat=True))
    pending.sort(key=lambda pk: (pk not in with_history, pk))  # keep jobs with history first
    done = pending[count:]
    Pod.objects.filter(job_id__in=done).update(state="succeeded")
    Job.objects.filter(pk__in=done).update(state="succeeded")


def cold() -> None:
    """No forecast stored, nothing cached: what a page sees before the worker's first refresh."""
    from django.core.cache import cache

    from kai_portal.history.models import JobForecast

    JobForecast.objects.all().delete()
    cache.clear()


def start_loop() -> subprocess.Popen[bytes]:
    """``manage.py run_scheduler`` in its own process, on the same database, as ``make run`` starts it."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "kai_portal.settings_test"}
    root = Path(__file__).resolve().parent.parent
    return subprocess.Popen(
        [sys.executable, str(root / "manage.py"), "run_scheduler"], cwd=root, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def loop_stats(since: Any, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    from django.conf import settings
    from django.utils import timezone

    from kai_portal.history.models import JobForecast, SchedulingCycle
    from kai_portal.previews import forecast_store

    cycles = list(SchedulingCycle.objects.filter(started_at__gte=since).values_list("status", "duration_ms"))
    proc.terminate()
    proc.wait(timeout=120)
    durations = [ms for status, ms in cycles if status == "succeeded" and ms is not None]
    rows = JobForecast.objects.count()
    estimated = JobForecast.objects.filter(estimated_at__isnull=False).count()
    budget = float(settings.FORECAST_BUDGET_SECONDS)
    report = forecast_store.refresh(timezone.now(), budget)  # one more, timed here (the loop is stopped)
    return {
        "cycles": len(cycles),
        "failed": sum(1 for status, _ in cycles if status == "failed"),
        "cycle_median_ms": statistics.median(durations) if durations else None,
        "stored": rows,
        "estimated": estimated,
        "refresh_s": report.seconds,
        "refresh_estimated": report.estimated,
        "budget_s": budget,
    }


def write_report(rows: list[Row], loops: dict[int, dict[str, Any]], runs: int, path: Path) -> None:
    """The committed tables: what was measured, on what, and the numbers."""
    import platform

    from django.conf import settings

    from kai_portal.workloads.models import Pod

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    lines = [
        "# Page render times",
        "",
        f"Generated by `benchmarks/page_render.py` ({runs} renders per page after one warm-up, Django test",
        f"client, {engine} with {Pod.objects.count():,} pods, {NODES} nodes x {GPUS_PER_NODE} GPUs all busy,",
        "200 cycles of decisions for 100 pending jobs, a day of per-minute usage samples). Do not edit by",
        "hand; rerun it.",
        "",
        "- **cold**: no stored forecast and an empty cache (before the worker's first refresh).",
        "- **loop**: `manage.py run_scheduler` running in another process (a cycle every "
        f"{settings.CYCLE_SECONDS} s, each followed by the forecast refresh), started "
        f"{LOOP_WARMUP_S:.0f} s before timing.",
        "",
        "Pages read the stored forecast only (`kai_portal/previews/forecast_store.py`); the goal is",
        "< 1 s per page at 1,000 pending jobs.",
        "",
        f"Machine: {os.cpu_count()} cores (shared with the loop and the database), Python "
        f"{platform.python_version()}, load average {load} after the run,",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| pending jobs | forecast | page | persona | median ms | p95 ms | status |",
        "|---:|---|---|---|---:|---:|---:|",
    ]
    lines += [
        f"| {pending:,} | {phase} | {name} | {who} | {med:.1f} | {p95_ms:.1f} | {status} |"
        for phase, name, who, pending, med, p95_ms, status in rows
    ]
    slowest = max(rows, key=lambda r: r[5])
    lines += [
        "",
        f"Slowest p95: {slowest[1]} ({slowest[2]}, {slowest[3]:,} pending, {slowest[0]}): "
        f"{slowest[5]:.1f} ms.",
        "",
        "What the loop did while the pages were timed:",
        "",
        "| pending jobs | cycles | failed | cycle median ms | forecast rows | estimated | "
        "one refresh s (budget) | estimated by it |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for pending, st in loops.items():
        median = f"{st['cycle_median_ms']:.0f}" if st["cycle_median_ms"] is not None else "–"
        lines.append(
            f"| {pending:,} | {st['cycles']} | {st['failed']} | {median} | {st['stored']} | "
            f"{st['estimated']} | {st['refresh_s']:.2f} ({st['budget_s']:.0f}) | {st['refresh_estimated']} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("pages.md"))
    args = parser.parse_args()
    ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    settings.ALLOWED_HOSTS = ["testserver"]
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    seed()
    rows: list[Row] = []
    loops: dict[int, dict[str, Any]] = {}
    print(f"{'phase':5} {'pend':>5} {'page':38} {'persona':7} {'median ms':>9} {'p95 ms':>9} status")
    for pending in (PENDING_JOBS, 10):
        keep_pending(pending)
        cold()
        rows += time_pages(args.runs, "cold", pending)
        since = timezone.now()
        proc = start_loop()
        try:
            time.sleep(LOOP_WARMUP_S)
            rows += time_pages(args.runs, "loop", pending)
        finally:
            loops[pending] = loop_stats(since, proc)
        print(loops[pending], flush=True)
    write_report(rows, loops, args.runs, args.out)


if __name__ == "__main__":
    main()
