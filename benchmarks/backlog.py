"""Cycle time and worker memory with a large pending backlog from one member (issue 26).

Issue 26: 60 jobs of 10,000 tasks from one member made every cycle hit Celery's 120 s hard limit
and the worker grow to 4.6 GB. This runs the scheduling loop as the worker does (one
``run_scheduling_cycle`` per CYCLE_SECONDS of simulated time, the forecast refresh after each)
on PostgreSQL, each scenario in a fresh process so its peak RSS is its own:

* ``reference``: 4 nodes x 8 GPUs, two teams; the other team's 4-GPU job arrives after 2 cycles;
* ``100k pending``: the same, plus one member's 10 elastic jobs x 10,000 one-GPU tasks = 100,000
  pending tasks (the bounds raised by an admin first), which fill the cluster; the other team's job
  then needs reclaim;
* ``100k pending, unbounded``: the same backlog with the cycle's backlog bounds off
  (``CYCLE_QUEUE_DEPTH``/``CYCLE_QUEUE_TASKS`` past everything: every pod listed, as before the fix),
  one cycle only, under a time limit.

Writes ``benchmarks/backlog.md`` (the previous run's medians beside the new ones).

    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/kai_bench_backlog \\
    TEST_REDIS_URL=redis://127.0.0.1:6379/15 .venv/bin/python benchmarks/backlog.py [--cycles 8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings_test")
os.environ.setdefault("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kai_bench_backlog")

OUT = Path(__file__).resolve().parent / "backlog.md"
CYCLE_SECONDS = 5
JOBS, TASKS_PER_JOB = 10, 10_000
SCENARIOS = {
    "reference": {"flood": 0, "bounded": True},
    "100k pending": {"flood": JOBS, "bounded": True},
    "100k pending, unbounded": {"flood": JOBS, "bounded": False},
}
UNBOUNDED_LIMIT_S = 300


def seed(flood_jobs: int) -> None:
    from django.db import connection

    from benchmarks.bench_db import empty_tables
    from kai_portal.accounts.models import User
    from kai_portal.nodes.models import GpuDevice, Node, NodePool
    from kai_portal.queues.models import Queue
    from kai_portal.teams.models import Membership, Team
    from kai_portal.workloads.models import Job
    from kai_portal.workloads.submission import submit

    empty_tables()  # reseed
    pool = NodePool.objects.create(name="default")
    for i in range(4):
        node = Node.objects.create(name=f"n{i}", pool=pool, cpu_millicores=64_000, memory_mib=262_144)
        for g in range(8):
            GpuDevice.objects.create(node=node, index=g, model="NVIDIA A100-SXM4-80GB", memory_mib=81_920)
    dept = Queue(name="dept", gpu_quota=32)
    dept.save()
    # An admin raises the flood team's bounds (the defaults refuse 100,000 pending tasks).
    flood = Team(slug="flood", name="Flood", max_pending_tasks=100_000, max_pending_tasks_per_member=100_000)
    flood.save()
    other = Team(slug="other", name="Other")
    other.save()
    flood_q = Queue(name="flood-q", parent=dept, team=flood, gpu_quota=16, max_pending_tasks=100_000)
    flood_q.save()
    Queue(name="other-q", parent=dept, team=other, gpu_quota=16).save()
    member = User.objects.create_user("flooder", password="x")
    Membership(team=flood, user=member).save()
    for i in range(flood_jobs):
        submit(Job(name=f"flood-{i}", queue=flood_q, submitter=member, gpu_count=1, task_count=TASKS_PER_JOB,
                   min_member=1))  # fmt: skip
    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(name: str, cycles: int) -> dict[str, object]:
    """One scenario in this process: seed, run the loop, report."""
    import django

    django.setup()
    from django.conf import settings

    from kai_portal.accounts.models import User
    from kai_portal.queues.models import Queue
    from kai_portal.scheduling.cycle import run_scheduling_cycle
    from kai_portal.teams.models import Membership, Team
    from kai_portal.workloads.models import Job, Pod
    from kai_portal.workloads.submission import submit

    spec = SCENARIOS[name]
    if not spec["bounded"]:
        settings.CYCLE_QUEUE_DEPTH = settings.CYCLE_QUEUE_TASKS = 10**9
        cycles = 1
    rss_before = rss_mib()  # seeded by another process: this one's peak is the loop's
    now = datetime.now(UTC)
    durations, totals = [], []
    theirs: Job | None = None
    started_after: int | None = None
    for i in range(cycles):
        now += timedelta(seconds=CYCLE_SECONDS)
        wall = time.perf_counter()
        cycle = run_scheduling_cycle(now=now)  # the cycle and the forecast refresh after it
        totals.append((time.perf_counter() - wall) * 1000)
        durations.append(float(cycle.duration_ms or 0))
        assert cycle.status == "succeeded", cycle.error
        if i == 1:
            other = Team.objects.get(slug="other")
            user = User.objects.create_user("neighbour", password="x")
            Membership(team=other, user=user).save()
            theirs = submit(Job(name="theirs", queue=Queue.objects.get(name="other-q"), submitter=user,
                                gpu_count=4))  # fmt: skip
        elif theirs is not None and started_after is None and theirs.pods.exclude(state="pending").exists():
            started_after = i - 1  # cycles since it was submitted
    return {
        "cycles": len(durations),
        "durations_ms": durations,
        "totals_ms": totals,
        "started_after": started_after,
        "pending": Pod.objects.filter(state="pending").count(),
        "rss_before": rss_before,
        "rss_peak": rss_mib(),
    }


def run_child(name: str, cycles: int) -> dict[str, object]:
    limit = UNBOUNDED_LIMIT_S if not SCENARIOS[name]["bounded"] else 1800
    subprocess.run([sys.executable, __file__, "--seed", str(SCENARIOS[name]["flood"])], check=True)
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", name, "--cycles", str(cycles)],
            capture_output=True, text=True, timeout=limit, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"timeout": limit}
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{name} failed:\n{exc.stdout[-3000:]}\n{exc.stderr[-3000:]}") from None
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def previous() -> dict[str, str]:
    """The last report's median cycle ms, by scenario."""
    if not OUT.exists():
        return {}
    found = {}
    for line in OUT.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| ([a-z0-9][a-z0-9 ,]*?) \| [^|]+ \| [^|]+ \| ([^|]+) \|", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def report(results: dict[str, dict[str, object]], load_before: tuple[float, ...]) -> str:
    before = previous()
    lines = [
        "# Cycle time and worker memory with 100,000 pending tasks from one member",
        "",
        "Generated by `benchmarks/backlog.py` (do not edit by hand; re-run to refresh).",
        "",
        "4 nodes x 8 GPUs, two teams (queues with 16 GPUs of quota each), PostgreSQL, the simulated "
        f"cluster; the loop as the worker runs it (a cycle every {CYCLE_SECONDS} s of simulated time, the "
        "forecast refresh after each). *100k pending*: one member's 10 elastic jobs x 10,000 one-GPU "
        "tasks (the bounds raised by an admin), which take the whole cluster; the other team's 4-GPU job "
        "arrives after the second cycle and needs reclaim. *reference*: the same without the backlog, "
        "measured in the same run. *unbounded*: the backlog with the cycle's backlog bounds off (every "
        f"pod listed, as before issue 26's fix), one cycle, stopped after {UNBOUNDED_LIMIT_S} s. "
        "*cycle* = the cycle's own `duration_ms`; *with forecast* = `run_scheduling_cycle` wall time, "
        "persisting its result and the forecast refresh included (what one Celery task takes; its hard "
        "limit is 120 s; `duration_ms` is taken before the result is persisted). "
        "*first* is the cycle that writes the backlog's reasons once; the median and max are over the "
        "rest. *peak RSS*: the loop process's peak resident memory (seeding runs in another process; "
        "in brackets, before the first cycle).",
        "",
        f"Run on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, CPython {platform.python_version()}, "
        f"{os.cpu_count()} cores; load average before {list(load_before)}, after "
        f"{[round(x, 2) for x in os.getloadavg()]} (other work on the machine inflates the times).",
        "",
        "| scenario | cycles | first cycle ms (cycle / with persist and forecast) | median cycle ms "
        "| previous median ms | max cycle ms "
        "| median with persist and forecast ms | max with persist and forecast ms "
        "| other team's job started after (cycles) "
        "| peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        if "timeout" in r:
            lines.append(f"| {name} | 0 | > {int(r['timeout']) * 1000:,} (did not finish) | - | "  # type: ignore[call-overload]
                         f"{before.get(name, '-')} | - | - | - | - | - |")  # fmt: skip
            continue
        d: list[float] = r["durations_ms"]  # type: ignore[assignment]
        t: list[float] = r["totals_ms"]  # type: ignore[assignment]
        rest, rest_t = (d[1:] or d), (t[1:] or t)
        median = statistics.median(rest)
        lines.append(
            f"| {name} | {r['cycles']} | {d[0]:,.0f} / {t[0]:,.0f} | {median:,.0f} | {before.get(name, '-')} "
            "| "
            f"{max(rest):,.0f} | {statistics.median(rest_t):,.0f} | {max(rest_t):,.0f} | "
            f"{r['started_after'] if r['started_after'] is not None else '-'} | "
            f"{r['rss_peak']:,.0f} ({r['rss_before']:,.0f}) |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--child", choices=list(SCENARIOS))
    ap.add_argument("--skip-unbounded", action="store_true")
    ap.add_argument("--seed", type=int, help="(internal) seed with this many flood jobs and exit")
    args = ap.parse_args()
    if args.seed is not None:
        import django

        django.setup()
        seed(args.seed)
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.cycles)))
        return 0
    from benchmarks.bench_db import ensure_postgres_database

    ensure_postgres_database("backlog.py")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    load = tuple(round(x, 2) for x in os.getloadavg())
    results = {}
    for name in SCENARIOS:
        if args.skip_unbounded and not SCENARIOS[name]["bounded"]:
            continue
        print(f"{name} ...", file=sys.stderr)
        results[name] = run_child(name, args.cycles)
        print(f"{name}: {results[name]}", file=sys.stderr)
    OUT.write_text(report(results, load), encoding="utf-8")
    print(OUT.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
