"""HTTP load test of the jobs API: gunicorn on localhost, 10,000 pods in PostgreSQL, wrk.

Recreates the PostgreSQL database ``kai_load`` (dropped first), migrates it,
seeds it with ``benchmarks/page_render.py``'s data set (40 nodes x 8 GPUs,
3 departments x 4 team leaf queues, 2,500 jobs x 4 pods = 10,000 pods,
scheduling decisions, a day of usage samples), creates API tokens for a team
member (the team's admin, not a portal admin) and for the portal admin, then
starts ``gunicorn kai_portal.wsgi`` with production settings (DEBUG off, a
generated SECRET_KEY, SECURE_SSL_REDIRECT off for plain HTTP,
ALLOWED_HOSTS=127.0.0.1) on a free port of 127.0.0.1, starts the scheduling
loop (``manage.py run_scheduler``: a cycle every 5 s on the simulated cluster,
each followed by the forecast refresh) and lets it run 20 s, then, with the
loop still running, drives gunicorn with wrk:

* GET  /api/v1/jobs/?page_size=50                        as the team member
* GET  /api/v1/jobs/?state=pending&queue=<their queue>   as the team member
* GET  /api/v1/jobs/?page_size=50                        as the portal admin (all 2,500 jobs)
* POST /api/v1/jobs/ (one-task whole-GPU job, unique names) as the team member

Each scenario runs ``--duration`` seconds (default 10) with ``--threads`` (2)
and ``--connections`` (8). wrk's Lua ``done()`` hook reports p50/p90/p95/p99
and the count of non-2xx answers. The data set has 1,000 pending jobs (every
GPU busy), so every cycle and forecast refresh works on them. Results go to
``benchmarks/api-load.md`` and ``benchmarks/api-load.json``. Traffic goes
only to 127.0.0.1; gunicorn and the loop are stopped at the end, also on
error. The whole run takes 1.5-2 minutes.

Needs wrk (``apt-get update && apt-get install -y wrk`` on Debian/Ubuntu),
PostgreSQL (``--pg``, default ``postgres://postgres@127.0.0.1:5432``; the
user must be allowed to create databases) and Redis (``--redis``)::

    .venv/bin/python benchmarks/api_load.py [--duration 10] [--workers 2] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

DB_NAME = "kai_load"
LOOP_WARMUP_S = 20.0
MEMBER, MEMBER_QUEUE = "team-0-0-user0", "team-0-0-q"  # team-0-0's admin (a member, not a portal admin)
PORTAL_ADMIN = "admin"

# One script for every scenario: method/body/header come from the environment; POST bodies get
# unique job names from a per-thread counter. done() writes the numbers wrk prints plus p95 as JSON.
WRK_LUA = r"""
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  wrk.method = os.getenv("LOAD_METHOD") or "GET"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("LOAD_TOKEN")
  wrk.headers["Accept"] = "application/json"
  if wrk.method == "POST" then wrk.headers["Content-Type"] = "application/json" end
  template = os.getenv("LOAD_BODY")
  counter = 0
  non2xx = 0
  statuses = {}
end

function request()
  if template then
    counter = counter + 1
    local body = string.gsub(template, "__NAME__", string.format("load-%d-%d", id, counter))
    return wrk.format(nil, nil, nil, body)
  end
  return wrk.format()
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    local key = tostring(status)
    statuses[key] = (statuses[key] or 0) + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  local codes = {}
  for _, t in ipairs(threads) do
    bad = bad + t:get("non2xx")
    for code, n in pairs(t:get("statuses")) do codes[code] = (codes[code] or 0) + n end
  end
  local parts = {}
  for code, n in pairs(codes) do table.insert(parts, string.format('"%s": %d', code, n)) end
  local e = summary.errors
  local out = io.open(os.getenv("LOAD_RESULT"), "w")
  out:write(string.format(
    '{"duration_us": %d, "requests": %d, "bytes": %d, "non2xx": %d, "statuses": {%s}, ' ..
    '"socket_errors": {"connect": %d, "read": %d, "write": %d, "timeout": %d}, ' ..
    '"latency_us": {"mean": %.1f, "stdev": %.1f, "max": %d, ' ..
    '"p50": %d, "p75": %d, "p90": %d, "p95": %d, "p99": %d}}',
    summary.duration, summary.requests, summary.bytes, bad, table.concat(parts, ", "),
    e.connect, e.read, e.write, e.timeout,
    latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(95), latency:percentile(99)))
  out:close()
end
"""


def pg_admin(pg: str) -> Any:
    import psycopg

    return psycopg.connect(f"{pg.rstrip('/')}/postgres", autocommit=True)


def recreate_database(pg: str) -> None:
    with pg_admin(pg) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed_and_tokens() -> dict[str, str]:
    """Migrate, seed 10,000 pods, return {persona: token secret}. Runs in this process."""
    import django

    django.setup()
    import page_render  # the page benchmark's data set: 2,500 jobs x 4 pods
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from kai_portal.accounts.tokens import create_token
    from kai_portal.teams.models import Membership
    from kai_portal.workloads.models import Job, Pod

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    page_render.seed()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    users = get_user_model().objects
    member = users.get(username=MEMBER)
    assert Membership.objects.filter(user=member, team__slug="team-0-0").exists()
    assert not member.is_superuser
    print(
        f"seeded in {time.perf_counter() - started:.1f} s: {Job.objects.count()} jobs, "
        f"{Pod.objects.count()} pods; {MEMBER} sees "
        f"{Job.objects.visible_to(member).count()} jobs",
        flush=True,
    )
    tokens = {
        "member": create_token(member, "load test")[1],
        "admin": create_token(users.get(username=PORTAL_ADMIN), "load test")[1],
    }
    connection.close()
    return tokens


def profile_list_queries(tokens: dict[str, str]) -> list[dict[str, Any]]:
    """The SQL behind one list request per GET scenario, with its time (Django test client, in-process)."""
    from django.conf import settings
    from django.db import connection, reset_queries
    from django.test import Client

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.DEBUG = True  # records connection.queries; this process only, not the gunicorn under test
    client = Client()
    rows = []
    for name, persona, url in GET_SCENARIOS:
        client.get(url, HTTP_AUTHORIZATION=f"Bearer {tokens[persona]}")  # warm
        reset_queries()
        started = time.perf_counter()
        response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {tokens[persona]}")
        total_ms = (time.perf_counter() - started) * 1000
        queries = [{"ms": float(q["time"]) * 1000, "sql": q["sql"]} for q in connection.queries]
        slowest = max(queries, key=lambda q: q["ms"])
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + slowest["sql"])
            plan = cursor.fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        rows.append(
            {
                "scenario": name,
                "status": response.status_code,
                "request_ms": round(total_ms, 1),
                "queries": len(queries),
                "sql_ms": round(sum(q["ms"] for q in queries), 1),
                "slowest_ms": round(slowest["ms"], 1),
                "slowest_sql": slowest["sql"],
                "slowest_explain_ms": round(plan[0]["Execution Time"], 1),
                "slowest_rows_read": _max_rows(plan[0]["Plan"]),
            }
        )
    settings.DEBUG = False
    connection.close()
    return rows


def _max_rows(node: dict[str, Any]) -> int:
    """The most rows any node of a plan produced: how much work hides behind a LIMIT 50."""
    rows = int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 1))
    return max([rows, *(_max_rows(child) for child in node.get("Plans", []))])


LIST = "/api/v1/jobs/?page_size=50"
GET_SCENARIOS = [
    ("GET /api/v1/jobs/?page_size=50 (team member)", "member", LIST),
    (
        f"GET /api/v1/jobs/?state=pending&queue={MEMBER_QUEUE} (team member)",
        "member",
        f"/api/v1/jobs/?state=pending&queue={MEMBER_QUEUE}&page_size=50",
    ),
    ("GET /api/v1/jobs/?page_size=50 (portal admin, all jobs)", "admin", LIST),
]
POST_BODY = json.dumps(
    {"name": "__NAME__", "queue": MEMBER_QUEUE, "task_count": 1, "min_member": 1, "gpu_count": 1}
)


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {proc.returncode} before answering /healthz")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn did not answer {base}/healthz within {timeout:.0f} s")


def smoke(base: str, method: str, path: str, token: str, body: str | None) -> int:
    """One request before the load, so a 4xx/5xx setup problem stops the run instead of skewing it."""
    data = body.replace("__NAME__", "load-smoke").encode() if body else None
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Accept", "application/json")
    if data:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:500]!r}") from None


def run_wrk(
    base: str, path: str, method: str, token: str, body: str | None, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    result = work / f"wrk-{secrets.token_hex(4)}.json"
    env = {
        **os.environ,
        "LOAD_METHOD": method,
        "LOAD_TOKEN": token,
        "LOAD_RESULT": str(result),
    }
    if body:
        env["LOAD_BODY"] = body
    cmd = [
        "wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.duration}s", "--timeout", "10s",
        "--latency", "-s", str(work / "load.lua"), f"{base}{path}",
    ]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.duration + 30)
    if out.returncode != 0 or not result.exists():
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stderr or out.stdout}")
    data: dict[str, Any] = json.loads(result.read_text())
    data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
    data["wrk_output"] = out.stdout
    return data


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    wrk_version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()
    pg = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", "SHOW server_version"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    status = subprocess.run([*git, "status", "--porcelain", "kai_portal"], capture_output=True, text=True)
    changed = len(status.stdout.splitlines())
    return {
        "code": (head.strip() or "unknown") + (f" + {changed} changed kai_portal/ files" if changed else ""),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "postgresql": pg or "unknown",
        "wrk": " ".join(wrk_version[0].split()[:2]) if wrk_version else "wrk",
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def ms(us: float) -> str:
    return f"{us / 1000:.1f}"


def loop_stats(since: Any, timed_from: Any, running_at_end: bool) -> dict[str, Any]:
    """What the scheduling loop did: cycles before and during the load, their durations, the forecast."""
    import statistics

    from django.db import connection

    from kai_portal.history.models import JobForecast, SchedulingCycle
    from kai_portal.workloads.models import Job

    connection.close()  # a fresh connection: the seeding one may have timed out
    cycles = list(
        SchedulingCycle.objects.filter(started_at__gte=since)
        .values_list("started_at", "status", "duration_ms")
    )
    during = [c for c in cycles if c[0] >= timed_from]
    durations = [c[2] for c in cycles if c[1] == "succeeded" and c[2] is not None]
    return {
        "running_at_end": running_at_end,
        "cycles": len(cycles),
        "cycles_during_load": len(during),
        "failed": sum(1 for c in cycles if c[1] == "failed"),
        "cycle_median_ms": statistics.median(durations) if durations else None,
        "pending_jobs_at_end": Job.objects.filter(state="pending").count(),
        "forecast_rows": JobForecast.objects.count(),
        "estimated": JobForecast.objects.filter(estimated_at__isnull=False).count(),
    }


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    m, cfg = report["machine"], report["config"]
    lines = [
        "# API load test: job listing and submission",
        "",
        "Generated by `benchmarks/api_load.py` (do not edit by hand; rerun it). "
        f"gunicorn `kai_portal.wsgi` with {cfg['workers']} sync workers on 127.0.0.1, DEBUG off, "
        f"PostgreSQL database `{DB_NAME}` seeded with {report['seed']['pods']:,} pods in "
        f"{report['seed']['jobs']:,} jobs (page_render.py's data set), Redis for the cache. "
        f"wrk: {cfg['threads']} threads, {cfg['connections']} connections, {cfg['duration_s']} s per row, "
        "`--latency`; p95 from the Lua `done()` hook (`latency:percentile(95)`). Requests carry an API "
        f"token (`Authorization: Bearer`). The team member is `{MEMBER}` (admin of team-0-0, "
        f"sees {report['seed']['member_visible_jobs']} jobs); the portal admin sees every job. "
        "POST submits a one-task, one-GPU job with a unique name to the member's queue.",
        "",
        f"**The scheduling loop was running** (`manage.py run_scheduler`, a cycle every 5 s with the "
        f"forecast refresh after each): {report['loop']['cycles']} cycles in all, "
        f"{report['loop']['cycles_during_load']} during the wrk runs, {report['loop']['failed']} failed, "
        f"median cycle {report['loop']['cycle_median_ms']} ms; "
        f"{report['seed']['pending_jobs']:,} pending jobs at the start, "
        f"{report['loop']['pending_jobs_at_end']:,} at the end; "
        f"{report['loop']['forecast_rows']:,} stored forecasts ({report['loop']['estimated']:,} with an "
        f"estimate). Loop still running when the load ended: {report['loop']['running_at_end']}.",
        "",
        "| Scenario | req/s | p50 ms | p90 ms | p95 ms | p99 ms | max ms | requests | non-2xx "
        "| socket errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:
        lat = row["latency_us"]
        sock = sum(row["socket_errors"].values())
        lines.append(
            f"| {row['scenario']} | {row['rps']:.1f} | {ms(lat['p50'])} | {ms(lat['p90'])} | "
            f"{ms(lat['p95'])} | {ms(lat['p99'])} | {ms(lat['max'])} | {row['requests']:,} | "
            f"{row['non2xx']} | {sock} |"
        )
    lines += [
        "",
        "SQL behind one request of each GET scenario (Django test client in the benchmark process, "
        "after one warm-up; not under load):",
        "",
        "| Scenario | request ms | queries | SQL ms | slowest query ms | its EXPLAIN ANALYZE ms "
        "| most rows in its plan |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["query_profile"]:
        lines.append(
            f"| {row['scenario']} | {row['request_ms']} | {row['queries']} | {row['sql_ms']} | "
            f"{row['slowest_ms']} | {row['slowest_explain_ms']} | {row['slowest_rows_read']:,} |"
        )
    lines += [
        "",
        "## Reading the numbers",
        "",
        report["interpretation"],
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores (wrk, gunicorn and PostgreSQL share them)",
        f"- Python {m['python']}, PostgreSQL {m['postgresql']}, {m['wrk']}",
        f"- gunicorn: {cfg['workers']} sync workers, `DB_CONN_MAX_AGE` 60 s",
        f"- Load average before the run: {', '.join(str(x) for x in m['load_average_before'])} "
        f"(after: {', '.join(str(x) for x in m['load_average_after'])})",
        f"- Date: {m['date']}; code: {m['code']}",
        "",
        "Rerun: `apt-get install -y wrk` once, then `.venv/bin/python benchmarks/api_load.py` "
        "(1.5-2 minutes; drops and recreates the `kai_load` database).",
        "",
    ]
    path.write_text("\n".join(lines))


def interpret(
    results: list[dict[str, Any]], profile: list[dict[str, Any]], cfg: dict[str, Any], m: dict[str, Any]
) -> str:
    member_list, pending, admin_list, post = results
    slow = max(profile, key=lambda p: p["slowest_explain_ms"])
    parts = [
        f"On this machine the API serves a 50-job page of a team member's jobs at "
        f"{member_list['rps']:.0f} req/s with p95 {ms(member_list['latency_us']['p95'])} ms, "
        f"the filtered pending list at {pending['rps']:.0f} req/s (p95 "
        f"{ms(pending['latency_us']['p95'])} ms), the portal admin's page over all jobs at "
        f"{admin_list['rps']:.0f} req/s (p95 {ms(admin_list['latency_us']['p95'])} ms), and accepts "
        f"{post['rps']:.0f} job submissions/s (p95 {ms(post['latency_us']['p95'])} ms).",
        f"With {cfg['workers']} sync workers and {cfg['connections']} connections, requests queue "
        "behind the workers, so latency is about connections / throughput; throughput is bound by CPU "
        "(Django/DRF serialisation in the workers, PostgreSQL and wrk share the same cores).",
    ]
    load = m["load_average_before"][0]
    if m["cores"] and load > 0.5 * m["cores"]:
        parts.append(
            f"Other processes were busy on the machine (1-minute load average {load} on {m['cores']} cores "
            "just before the run), so these figures are lower bounds; with a free core one request "
            "costs about the 'request ms' of the second table."
        )
    if "COUNT(DISTINCT" in slow["slowest_sql"] and slow["slowest_rows_read"] > 500:
        parts.append(
            f'The slowest query is the list page query of "{slow["scenario"]}" '
            f"({slow['slowest_explain_ms']} ms in EXPLAIN ANALYZE): `SELECT workloads_job.*, "
            "COUNT(DISTINCT workloads_pod.id) [FILTER (WHERE state ...)] x4 ... FROM workloads_job "
            "LEFT JOIN workloads_pod ... GROUP BY workloads_job.id, ... ORDER BY created_at DESC LIMIT 50` "
            "(JobViewSet.get_queryset's pod-count annotations): PostgreSQL joins and groups the pods of "
            f"every visible job ({slow['slowest_rows_read']:,} rows) before it can keep the newest 50, "
            "so its cost grows with the total number of pods, not with the page size. Counting pods "
            "in correlated subqueries (or for the 50 page ids only) would make it proportional to the page."
        )
    else:
        parts.append(
            f'The slowest query ("{slow["scenario"]}") takes {slow["slowest_explain_ms"]} ms in '
            "EXPLAIN ANALYZE; the SQL is in api-load.json."
        )
    bad = sum(r["non2xx"] + sum(r["socket_errors"].values()) for r in results)
    parts.append("Every request succeeded (2xx)." if bad == 0 else f"{bad} requests failed: see the table.")
    return " ".join(parts)


def main() -> int:
    global DB_NAME
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per scenario (default 10)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers (default 2)")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--db", default=DB_NAME, help=f"database to drop and recreate (default {DB_NAME})")
    parser.add_argument("--no-write", action="store_true", help="print results, do not write files")
    args = parser.parse_args()
    DB_NAME = args.db

    if shutil.which("wrk") is None:
        print(
            "wrk is not installed. On Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y wrk "
            "(macOS: brew install wrk).",
            file=sys.stderr,
        )
        return 2
    if not 1 <= args.duration <= 30:
        parser.error("--duration must be 1..30 s (the run stays well under 3 minutes)")

    server_env = {
        "DJANGO_SETTINGS_MODULE": "kai_portal.settings",
        "DATABASE_URL": f"{args.pg.rstrip('/')}/{DB_NAME}",
        "REDIS_URL": args.redis,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "SECURE_SSL_REDIRECT": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
        # One member submits as fast as wrk can: this measures what a submit costs the server,
        # not the per-user write rate (which would answer most of them 429).
        "WRITE_RATE": "1000000/min",
    }
    os.environ.update(server_env)
    for key in ("SECRET_KEY_FILE", "DJANGO_SECRET_KEY"):
        os.environ.pop(key, None)

    started = time.monotonic()
    m = machine()
    print(f"recreating database {DB_NAME} ...", flush=True)
    recreate_database(args.pg)
    tokens = seed_and_tokens()
    from kai_portal.workloads.models import Job, Pod

    seed = {"jobs": Job.objects.count(), "pods": Pod.objects.count(),
            "pending_jobs": Job.objects.filter(state="pending").count()}  # fmt: skip
    from django.contrib.auth import get_user_model

    member = get_user_model().objects.get(username=MEMBER)
    seed["member_visible_jobs"] = Job.objects.visible_to(member).count()
    profile = profile_list_queries(tokens)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gunicorn = ROOT / ".venv" / "bin" / "gunicorn"
    gunicorn_cmd = [
        str(gunicorn) if gunicorn.exists() else "gunicorn", "kai_portal.wsgi", "-w", str(args.workers),
        "-b", f"127.0.0.1:{port}", "--timeout", "60", "--log-level", "warning",
    ]  # fmt: skip
    results: list[dict[str, Any]] = []
    from django.utils import timezone

    loop_since = timezone.now()
    loop_timed_from = loop_since
    with tempfile.TemporaryDirectory(prefix="kai-load-") as tmp:
        work = Path(tmp)
        (work / "load.lua").write_text(WRK_LUA)
        log = (work / "gunicorn.log").open("wb")
        proc = subprocess.Popen(
            gunicorn_cmd, cwd=ROOT, env={**os.environ, **server_env}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        loop_log = (work / "loop.log").open("wb")
        loop = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "run_scheduler"], cwd=ROOT,
            env={**os.environ, **server_env}, stdout=loop_log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            wait_healthy(base, proc)
            print(f"gunicorn up on {base} ({args.workers} workers); scheduling loop running, "
                  f"waiting {LOOP_WARMUP_S:.0f} s", flush=True)  # fmt: skip
            time.sleep(LOOP_WARMUP_S)
            loop_timed_from = timezone.now()
            scenarios = [(name, persona, path, "GET", None) for name, persona, path in GET_SCENARIOS]
            scenarios.append(("POST /api/v1/jobs/ (team member, 1 task x 1 GPU)", "member", "/api/v1/jobs/",
                              "POST", POST_BODY))  # fmt: skip
            for name, persona, path, method, body in scenarios:
                smoke(base, method, path, tokens[persona], body)
                row = run_wrk(base, path, method, tokens[persona], body, args, work)
                row["scenario"] = name
                results.append(row)
                lat = row["latency_us"]
                print(
                    f"{name:70} {row['rps']:8.1f} req/s  p50 {ms(lat['p50']):>7} ms  "
                    f"p95 {ms(lat['p95']):>7} ms  p99 {ms(lat['p99']):>7} ms  non-2xx {row['non2xx']}",
                    flush=True,
                )
        except BaseException:
            log.flush()
            sys.stderr.write((work / "gunicorn.log").read_text(errors="replace")[-4000:])
            raise
        finally:
            loop_running_at_end = loop.poll() is None
            for child in (proc, loop):
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGTERM)
                    try:
                        child.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(child.pid, signal.SIGKILL)
                        child.wait()
            log.close()
            loop_log.close()
    loop_report = loop_stats(loop_since, loop_timed_from, loop_running_at_end)
    print(f"scheduling loop: {loop_report}", flush=True)

    m["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    seed["jobs_after_post"] = Job.objects.count()
    cfg = {
        "workers": args.workers, "threads": args.threads, "connections": args.connections,
        "duration_s": args.duration, "database": DB_NAME,
    }  # fmt: skip
    report = {
        "machine": m,
        "config": cfg,
        "seed": seed,
        "results": [{k: v for k, v in r.items() if k != "wrk_output"} for r in results],
        "query_profile": profile,
        "loop": loop_report,
        "interpretation": interpret(results, profile, cfg, m),
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    for row in profile:
        print(
            f"{row['scenario']}: {row['queries']} queries, {row['sql_ms']} ms SQL, slowest "
            f"{row['slowest_ms']} ms (EXPLAIN ANALYZE {row['slowest_explain_ms']} ms, "
            f"{row['slowest_rows_read']} rows)"
        )
    print(report["interpretation"])
    print(f"total {report['elapsed_s']} s")
    if not args.no_write:
        (ROOT / "benchmarks" / "api-load.json").write_text(json.dumps(report, indent=2) + "\n")
        write_markdown(ROOT / "benchmarks" / "api-load.md", report)
        print("wrote benchmarks/api-load.md and benchmarks/api-load.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
