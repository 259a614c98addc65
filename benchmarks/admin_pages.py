"""Render times of the admin pages (nodes, workloads table and CSV, showback, YAML views and
import) with 1,000 pending jobs, on `make run`'s configuration (SQLite, DEBUG=1) by default.

Seeds the demo data (``seed_demo``) into a fresh database, adds 1,000 one-GPU jobs that stay
pending (the demo cluster is full), runs scheduling cycles so that usage and pool samples
exist, then times each page with Django's test client as the portal admin: the median and
the maximum of ``--runs`` renders after one warm-up. Writes ``benchmarks/admin-pages.md``.

    REDIS_URL=redis://127.0.0.1:6379/5 .venv/bin/python benchmarks/admin_pages.py [--runs 7]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kai_admin_bench ... --label postgresql
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DATABASE_URL", "sqlite:////tmp/kai_admin_pages_bench.sqlite3")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")  # Django's test client

PENDING = 1_000
CYCLES = 30


def prepare() -> None:
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "sqlite":
        Path(connection.settings_dict["NAME"]).unlink(missing_ok=True)
    else:
        call_command("flush", "--noinput", verbosity=0)
    call_command("migrate", "--noinput", verbosity=0)
    call_command("seed_demo", verbosity=0)

    from django.utils import timezone

    from kai_portal.queues.models import Queue
    from kai_portal.scheduling.cycle import run_scheduling_cycle
    from kai_portal.workloads.models import Job, Pod

    leaves = list(Queue.objects.leaves().exclude(team=None))
    jobs = [
        Job(
            name=f"bench-{i:04d}",
            queue=leaves[i % len(leaves)],
            gpu_count=1,
            priority=50,
            cpu_millicores=1000,
        )
        for i in range(PENDING)
    ]
    Job.objects.bulk_create(jobs)  # bulk: the model rules are not what is measured here
    Pod.objects.bulk_create(Pod(job=j, index=0, name=f"{j.name}-0") for j in jobs)
    start = timezone.now() - timedelta(seconds=5 * CYCLES)
    for i in range(CYCLES):
        run_scheduling_cycle(now=start + timedelta(seconds=5 * i))


def measure(runs: int) -> list[tuple[str, float, float, int]]:
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from kai_portal.accounts.models import User
    from kai_portal.workloads.models import Job

    client = Client()
    client.force_login(User.objects.get(username="admin"))
    job = Job.objects.filter(state="pending").first()
    assert job is not None
    paths = [
        "/cluster/nodes/",
        "/cluster/nodes/?window=7d",
        "/jobs/table/",
        "/jobs/table/?sort=-gpus&state=pending",
        "/jobs/table.csv",
        "/showback/?preset=7d",
        "/showback/showback.csv?preset=30d",
        f"/jobs/{job.uid}/yaml/",
        f"/queues/{job.queue.name}/yaml/",
        "/queues/new/import/",
    ]
    out = []
    for path in paths:

        def get(path: str = path) -> None:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            if response.streaming:
                b"".join(response.streaming_content)

        get()  # warm-up
        reset_queries()  # each request starts by clearing the log; start the count from empty
        with CaptureQueriesContext(connection) as queries:
            get()
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            get()
            times.append((time.perf_counter() - t) * 1000)
        out.append((path, statistics.median(times), max(times), len(queries)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--label", default="sqlite (make run)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "admin-pages.md"))
    args = parser.parse_args()
    import django

    django.setup()
    t = time.perf_counter()
    prepare()
    seeded = time.perf_counter() - t
    rows = measure(args.runs)
    from kai_portal.workloads.models import Job

    lines = [
        f"## {args.label}: {Job.objects.filter(state='pending').count()} pending jobs",
        "",
        f"`benchmarks/admin_pages.py --runs {args.runs}`; {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}; seeded in {seeded:.0f} s (demo data, {PENDING} extra one-GPU "
        f"jobs, {CYCLES} cycles). Median and max of {args.runs} renders after a warm-up, as the portal "
        "admin.",
        "",
        "| page | median ms | max ms | queries |",
        "|---|---:|---:|---:|",
        *[f"| `{p}` | {m:.0f} | {mx:.0f} | {q} |" for p, m, mx, q in rows],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    path = Path(args.output)
    header = "# Admin pages with 1,000 pending jobs\n\nWritten by `benchmarks/admin_pages.py`.\n\n"
    previous = path.read_text() if path.exists() else header
    kept = previous.split(f"## {args.label}:")[0].rstrip() + "\n\n"
    rest = "".join("## " + s for s in previous.split("## ")[1:] if not s.startswith(f"{args.label}:"))
    path.write_text((kept if kept.strip() else header) + text + ("\n" + rest if rest else ""))


if __name__ == "__main__":
    main()
