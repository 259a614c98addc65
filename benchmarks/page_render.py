"""Page render times with 10,000 pods in PostgreSQL.

Seeds a realistic database (40 nodes x 8 GPUs, a 3-department queue tree with
12 leaf queues, 2,500 jobs x 4 pods = 10,000 pods, 200 scheduling cycles of
decisions for the pending jobs, a day of per-minute usage samples per queue
and resource, audit entries) and times the main pages with Django's test
client, as a portal admin and as a team member. Reports the median and p90 of
``--runs`` renders per page after one warm-up.

    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/kai_bench_pages \\
    TEST_REDIS_URL=redis://127.0.0.1:6379/13 \\
    .venv/bin/python benchmarks/page_render.py [--runs 15] [--reseed]

The database named by TEST_DATABASE_URL is created if missing and its tables
are dropped and rebuilt when ``--reseed`` is given (or when it is empty).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings_test")
os.environ.setdefault("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kai_bench_pages")

NODES, GPUS_PER_NODE = 40, 8
JOBS, PODS_PER_JOB = 2_500, 4
CYCLES, BLOCKED_JOBS = 200, 100


def ensure_database() -> None:
    import dj_database_url
    import psycopg

    cfg = dj_database_url.parse(os.environ["TEST_DATABASE_URL"])
    admin = psycopg.connect(
        host=cfg["HOST"], port=cfg["PORT"] or 5432, user=cfg["USER"], password=cfg["PASSWORD"] or None,
        dbname="postgres", autocommit=True,
    )  # fmt: skip
    exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [cfg["NAME"]]).fetchone()
    if not exists:
        admin.execute(f'CREATE DATABASE "{cfg["NAME"]}"')
    admin.close()


def seed() -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from kai_portal.audit.models import AuditEntry
    from kai_portal.cluster.models import GpuDevice, Node, NodePool
    from kai_portal.queues.models import Queue
    from kai_portal.scheduling.models import Decision, JobMessage, QueueStatus, SchedulingCycle, UsageSample
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
    jobs = Job.objects.bulk_create(
        Job(name=f"job-{i:05d}", queue=leaves[i % len(leaves)], submitter=users[i % len(users)], gpu_count=1,
            task_count=PODS_PER_JOB, min_member=1, priority=50,
            state="running" if i % 5 == 0 else ("pending" if i % 5 == 1 else "succeeded"))
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
                            node=device.node if device else None, reason=""))  # fmt: skip
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


def time_pages(runs: int) -> list[tuple[str, str, float, float, int]]:
    """Median and p90 render time of each main page, per persona."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from kai_portal.scheduling.models import Decision
    from kai_portal.workloads.models import Job

    logging.getLogger("django.request").setLevel(logging.CRITICAL)  # expected 403s, not news
    admin = get_user_model().objects.get(username="admin")
    blocked = Job.objects.get(pk=Decision.objects.values_list("job_id", flat=True).first())
    team = blocked.queue.team
    member = get_user_model().objects.get(username=f"{team.slug}-user1")
    running = Job.objects.filter(state="running", queue=blocked.queue).first()
    pages = [
        ("overview", "/cluster/"),
        ("queue tree", "/queues/"),
        ("queue detail (day)", f"/queues/{blocked.queue.name}/?window=day"),
        ("queue detail (week)", f"/queues/{blocked.queue.name}/?window=week"),
        ("jobs list", "/jobs/"),
        ("jobs list filtered", f"/jobs/?state=pending&team={team.slug}"),
        ("jobs list page 40", "/jobs/?page=40"),
        ("job detail (800 decisions)", f"/jobs/{blocked.uid}/"),
        ("job detail fragment (htmx)", f"/jobs/{blocked.uid}/"),
        ("job detail running", f"/jobs/{running.uid}/"),
        ("submit form", "/jobs/submit/"),
        ("audit log", "/audit/"),
    ]
    rows: list[tuple[str, str, float, float, int]] = []
    print(f"{'page':34} {'persona':8} {'median ms':>10} {'p90 ms':>8} {'status':>6}")
    for persona, user in (("admin", admin), ("member", member)):
        client = Client()
        client.force_login(user)
        for name, url in pages:
            headers = {"HTTP_HX_REQUEST": "true"} if "htmx" in name else {}
            response = client.get(url, **headers)  # warm-up
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                response = client.get(url, **headers)
                times.append((time.perf_counter() - started) * 1000)
            times.sort()
            p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
            median = statistics.median(times)
            rows.append((name, persona, median, p90, response.status_code))
            print(f"{name:34} {persona:8} {median:10.1f} {p90:8.1f} {response.status_code:>6}")
    return rows


def write_report(rows: list[tuple[str, str, float, float, int]], runs: int, path: Path) -> None:
    """The committed table: what was measured, on what, and the numbers."""
    import platform

    from kai_portal.workloads.models import Pod

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# Page render times",
        "",
        f"Generated by `benchmarks/page_render.py` ({runs} renders per page after one warm-up,",
        f"Django test client, PostgreSQL with {Pod.objects.count():,} pods,",
        f"{NODES} nodes x {GPUS_PER_NODE} GPUs,",
        "200 cycles of decisions, a day of per-minute usage samples).",
        "A member's 403 on the audit log is the expected refusal.",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, load average {load},",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| page | persona | median ms | p90 ms | status |",
        "|---|---|---:|---:|---:|",
    ]
    lines += [f"| {n} | {who} | {med:.1f} | {p90:.1f} | {status} |" for n, who, med, p90, status in rows]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("pages.md"))
    args = parser.parse_args()
    ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["testserver"]
    from kai_portal.workloads.models import Pod

    if args.reseed:
        call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)
    if not Pod.objects.exists():
        seed()
    write_report(time_pages(args.runs), args.runs, args.out)


if __name__ == "__main__":
    main()
