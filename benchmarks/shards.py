"""Shards (issue 30): each node pool's cycle period beside one pool alone, measured in one run.

Seeds ``--pools`` node pools of ``--nodes`` nodes x 8 GPUs each, a queue tree per pool (a
department and 4 leaves), 90 % of each pool's GPUs running (4-pod jobs, one GPU a pod) and
pending work worth 20 % more (half of it never fits, so every cycle tries it). Then, each phase
with real worker processes that each run one pool's cycles back to back
(``run_scheduling_cycle(pool=...)``, its own lock, on PostgreSQL and Redis):

1. alone: pool 0's worker only, ``--cycles`` cycles (the reference);
2. together: one worker per pool, all at once, ``--cycles`` cycles each;
3. alone again (pool 0), to bracket any change in the machine's load;
4. one failing: as 2, but pool 0's cycle fails every time (an exception in its snapshot build):
   the other pools' periods beside phase 2's.

A pool's cycle period is the time from one cycle's start to the next's in its worker (cycles
back to back: the period is the cycle's duration plus the loop's own overhead). Each worker's first
cycle is left out (the first cycle places the new work; the rest are the steady state). Writes
``benchmarks/shards.md``.

    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/kai_bench_shards \\
    .venv/bin/python benchmarks/shards.py --pools 4 --nodes 5000 --cycles 6

The database named by TEST_DATABASE_URL (PostgreSQL) must be one a benchmark created
(``bench_db.py``); it is emptied and reseeded.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings_test")
os.environ.setdefault("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/kai_bench_shards")
os.environ.setdefault("TEST_REDIS_URL", "redis://127.0.0.1:6379/3")

GPUS_PER_NODE = 8
OUT = Path(__file__).resolve().parent / "shards.md"


def _django() -> None:
    os.environ["DATABASE_URL"] = os.environ["TEST_DATABASE_URL"]
    import django

    django.setup()


def seed(pools: int, nodes: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from benchmarks.bench_db import empty_tables, make_nodes, make_pods
    from kai_portal.nodes.models import NodePool
    from kai_portal.queues.models import Queue
    from kai_portal.workloads.models import Job

    empty_tables()  # reseed
    user = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
    now = datetime.now(UTC)
    gpus = nodes * GPUS_PER_NODE
    for p in range(pools):
        pool = NodePool.objects.create(name=f"pool-{p}")
        devices = make_nodes(pool, f"p{p}-", nodes, GPUS_PER_NODE, "NVIDIA H100 80GB HBM3")
        dept = Queue(name=f"dept-{p}", node_pool=pool, gpu_quota=gpus)
        dept.save()
        leaves = []
        for leaf in range(4):
            q = Queue(name=f"team-{p}-{leaf}", parent=dept, gpu_quota=gpus // 4)
            q.save()
            leaves.append(q)
        running, pending = int(gpus * 0.9) // 4, int(gpus * 0.2) // 4
        jobs = Job.objects.bulk_create(
            (
                Job(
                    name=f"p{p}-job-{i:05d}",
                    queue=leaves[i % 4],
                    node_pool=pool,
                    submitter=user,
                    gpu_count=1,
                    task_count=4,
                    min_member=4,
                    priority=50,
                    state="running" if i < running else "pending",
                    duration=timedelta(days=1),
                )
                for i in range(running + pending)
            ),
            batch_size=5000,
        )
        make_pods(jobs, 4, iter(devices), now - timedelta(minutes=30))
    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def worker(pool: str, cycles: int, fail: bool, start_at: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """One worker process: ``cycles`` cycles of ``pool`` back to back; puts (pool, starts, statuses)."""
    os.environ.setdefault("FORECAST_AFTER_CYCLE", "0")
    _django()
    from django.conf import settings

    from kai_portal.scheduling import cycle as cycle_module

    settings.FORECAST_AFTER_CYCLE = False  # the forecast is measured on its own (forecast-in-worker)
    if fail:

        def poisoned(now: datetime, pool: str | None = None) -> None:
            raise RuntimeError(f"poisoned: pool {pool}'s cycle fails")

        cycle_module.build_snapshot = poisoned  # type: ignore[assignment]
    time.sleep(max(0.0, start_at - time.time()))
    starts: list[float] = []
    cpu: list[float] = []
    statuses: list[str] = []
    for _ in range(cycles):
        starts.append(time.time())
        cpu.append(time.process_time())
        try:
            statuses.append(cycle_module.run_scheduling_cycle(pool=pool).status)
        except RuntimeError:
            statuses.append("failed")
    starts.append(time.time())  # the end of the last cycle: its period too
    cpu.append(time.process_time())
    out.put((pool, starts, cpu, statuses))


Periods = dict[str, tuple[list[float], list[str], list[float]]]  # pool -> (periods, statuses, CPU s)


def phase(pools: list[str], cycles: int, failing: str | None = None) -> Periods:
    """Run one worker process per pool at once; each pool's periods (first cycle left out) and statuses."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 8  # every process imported Django and is waiting: start together
    procs = [ctx.Process(target=worker, args=(p, cycles, p == failing, start_at, out)) for p in pools]
    for proc in procs:
        proc.start()
    got = {}
    for _ in procs:
        pool, starts, cpu, statuses = out.get(timeout=3600)
        periods = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        cpu_used = [b - a for a, b in zip(cpu, cpu[1:], strict=False)]
        got[pool] = (periods[1:], statuses, cpu_used[1:])
    for proc in procs:
        proc.join()
    return got


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(args: argparse.Namespace, results: dict[str, Periods], load: tuple[float, ...]) -> str:
    alone = _median(results["alone"]["pool-0"][0])
    again = _median(results["alone again"]["pool-0"][0])
    reference = min(alone, again)
    lines = [
        "# Shards: each pool's cycle period beside one pool alone",
        "",
        f"`benchmarks/shards.py --pools {args.pools} --nodes {args.nodes} --cycles {args.cycles}`, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores (load average before: {', '.join(map(str, load))}), PostgreSQL and Redis on "
        "the same machine.",
        "",
        f"{args.pools} pools x {args.nodes:,} nodes x {GPUS_PER_NODE} GPUs; per pool 90 % of the GPUs "
        "running (4-pod jobs) and 20 % more pending (half never fits). One worker process per pool, each "
        "running its pool's cycles back to back (`run_scheduling_cycle(pool=...)`: its own Redis lock and "
        "fencing token; the forecast after each cycle off). "
        "Period: one cycle's start to the next's; each worker's first cycle left out (it places the new "
        "work). Medians, seconds. CPU: the worker process's own CPU time per cycle (not PostgreSQL's): "
        "when it stays put while the period grows, the pools are sharing the machine's cores, not "
        "waiting for each other.",
        "",
        "| phase | pool | cycles | statuses | median period (s) | worker CPU (s) | × one pool alone |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for name, got in results.items():
        for pool, (periods, statuses, cpu) in sorted(got.items()):
            counted = {s: statuses.count(s) for s in sorted(set(statuses))}
            text = ", ".join(f"{n} {s}" for s, n in counted.items())
            median = _median(periods)
            ratio = f"{median / reference:.2f}" if periods and statuses[-1] != "failed" else "–"
            cells = [name, pool, str(len(statuses)), text, f"{median:.3f}", f"{_median(cpu):.3f}", ratio]
            lines.append("| " + " | ".join(cells) + " |")
    together = [_median(p) for p, _s, _c in results["together"].values()]
    worst = max(together) / reference
    failing = [_median(p) for pool, (p, _s, _c) in results["one failing"].items() if pool != "pool-0"]
    lines += [
        "",
        f"Reference (one pool alone, the lower of the two alone phases): {reference:.3f} s "
        f"(before {alone:.3f}, after {again:.3f}).",
        f"Together: the slowest pool's period is **{worst:.2f}×** one pool alone (goal ≤ 1.3× at 4 pools × "
        f"5,000 nodes with 4 workers{'' if (args.pools, args.nodes) == (4, 5000) else '; not these sizes'}).",
        f"With pool 0 failing every cycle, the other pools' slowest period is "
        f"{(max(failing) / reference) if failing else float('nan'):.2f}× one pool alone.",
        "",
        f"{args.pools} pools on {os.cpu_count()} cores: with fewer cores than pools (plus PostgreSQL), the "
        "workers share CPUs and the together figure measures the machine, not the locks; rerun with the "
        "issue's sizes on a machine with a core per worker and the database's own.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=5000, help="nodes per pool")
    ap.add_argument(
        "--cycles", type=int, default=6, help="cycles per worker and phase (the first is left out)"
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    from benchmarks.bench_db import ensure_postgres_database

    ensure_postgres_database("shards.py")
    _django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    started = time.monotonic()
    seed(args.pools, args.nodes)
    print(f"seeded in {time.monotonic() - started:.0f} s", file=sys.stderr)
    load = tuple(round(x, 2) for x in os.getloadavg())
    pools = [f"pool-{p}" for p in range(args.pools)]
    from django.db import connection

    connection.close()  # the workers are other processes
    results = {}
    for name, run, failing in [
        ("alone", pools[:1], None),
        ("together", pools, None),
        ("alone again", pools[:1], None),
        ("one failing", pools, "pool-0"),
    ]:
        results[name] = phase(run, args.cycles, failing)
        print(name, {p: round(_median(v[0]), 3) for p, v in results[name].items()}, file=sys.stderr)
    args.out.write_text(report(args, results, load), encoding="utf-8")
    print(args.out.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
