"""Create -> bound latency on an idle KWOK cluster, and a 300-pod burst (issue 29, item 2).

Starts its own control plane (``deploy/k8s-testbed/k8s-up.sh`` into ``var/k8s-latency``) unless
``--kubeconfig`` names a running one, creates ``--nodes`` KWOK nodes x 8 ``nvidia.com/gpu``
(waiting until every one is Ready and untainted), then for each scheduler measured:

* **single**: one one-GPU pod created on the idle cluster, the time from just before the create
  request to the moment a watch sees ``spec.nodeName`` set; ``--samples`` times (each pod deleted,
  and gone, before the next; a random 1-2 s pause between samples so a periodic loop is met at
  every phase of its period); p50 / p90 / median;
* **burst**: ``--burst`` pods created at once (16 threads, as a controller would): the first
  bind and the last bind after the first create, and for the portal, how many cycles bound them.

Two ways to run:

* the portal (default): for each ``--loop`` (``event``: ``manage.py run_scheduler``, the
  event-driven loop with background watches; ``poll``: ``manage.py run_scheduler --poll``, the
  old loop, a cycle every ``CYCLE_SECONDS`` with watch windows inside each; ``poll1``: the same at
  ``CYCLE_SECONDS=1``) the script starts the portal's scheduler as a process of its own,
  measures, and stops it. The portal's rows go in a PostgreSQL database the script creates under
  a fresh name (on ``TEST_DATABASE_URL``'s server) and drops at the end: it never touches a
  database it did not create.
* ``--external``: only creates the pods (``spec.schedulerName`` ``--scheduler-name``, default
  ``kai-scheduler``; queue label ``--queue-label``=``--queue``) and measures, whoever schedules
  them (KAI's own scheduler and binder run against the same cluster, say; ``--kubeconfig`` names
  it). No database is used.

The portal's scheduler uses ``TEST_REDIS_URL`` for its cycle lock: give it a Redis database no test
or other portal uses while it runs (their cycles would be skipped, or skip its own).

Results are merged by ``--label`` into ``benchmarks/kwok-latency.json`` and the whole table is
written to ``benchmarks/kwok-latency.md`` (``make bench-latency``).

    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres TEST_REDIS_URL=redis://127.0.0.1:6379/6 \\
    nice -n 5 .venv/bin/python benchmarks/kwok_latency.py --loop poll --loop event
    .venv/bin/python benchmarks/kwok_latency.py --external --kubeconfig var/k8s/admin.kubeconfig \\
        --label "KAI d5bc503" --queue default-queue
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.kwok_throughput import make_nodes, start_cluster, stop_cluster, wait_ready  # noqa: E402
from benchmarks.pod_watch import PodWatch  # noqa: E402

OUT_MD = Path(__file__).resolve().parent / "kwok-latency.md"
OUT_JSON = Path(__file__).resolve().parent / "kwok-latency.json"
GPUS_PER_NODE = 8
BIND_TIMEOUT = 120.0
LOOPS = {
    # name: (run_scheduler arguments, extra environment, what it is)
    "event": ([], {}, "portal, event-driven loop (background watches; a cycle on each change, "
                      "debounced, and at least every CYCLE_SECONDS=5)"),
    "poll": (["--poll"], {"CYCLE_SECONDS": "5"}, "portal, old loop (a cycle every CYCLE_SECONDS=5, "
                                                  "watch windows inside each cycle)"),
    "poll1": (["--poll"], {"CYCLE_SECONDS": "1"}, "portal, old loop at CYCLE_SECONDS=1"),
}  # fmt: skip


# ----- the pods and the measuring watch ------------------------------------------------------------


def pod_body(name: str, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {args.queue_label: args.queue}},
        "spec": {
            "schedulerName": args.scheduler_name,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }  # fmt: skip


class LatencyWatch(PodWatch):
    """Follows the namespace's pods: when each was first seen bound, and which exist."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        super().__init__(api_client, namespace, timeout_s=30, name="latency-watch")
        self.bound: dict[str, float] = {}
        self.present: set[str] = set()
        self.changed = threading.Condition()

    def seen(self, kind: str, name: str, pod: dict[str, Any], now: float) -> None:
        with self.changed:
            if kind == "DELETED":
                self.present.discard(name)
            else:
                self.present.add(name)
                if (pod.get("spec") or {}).get("nodeName") and name not in self.bound:
                    self.bound[name] = now
            self.changed.notify_all()

    def wait_for(self, what: str, check: Any, timeout: float = BIND_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0 or self.error:
                    raise SystemExit(f"timed out waiting for {what} ({self.error or 'no error'})")
                self.changed.wait(min(left, 1.0))


def measure(core: Any, api_client: Any, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """The single-pod samples and the burst, in a namespace of their own (deleted after)."""
    namespace = f"latency-{tag}-{secrets.token_hex(3)}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    wait_default_account(core, namespace)
    watch = LatencyWatch(api_client, namespace)
    watch.start()
    time.sleep(1.0)  # the watch is open before the first pod exists
    rng = random.Random(args.seed)
    singles: list[float] = []
    try:
        time.sleep(args.settle)  # the scheduler's start-up (first lists, first cycles) is over
        for i in range(args.samples):
            name = f"single-{i:03d}"
            sent = time.monotonic()
            core.create_namespaced_pod(namespace, pod_body(name, args), _preload_content=False).read()
            watch.wait_for(f"{name} bound", lambda n=name: n in watch.bound)
            singles.append(watch.bound[name] - sent)
            print(f"[{tag}] {name}: {singles[-1]:.3f} s", file=sys.stderr)
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _preload_content=False).read()
            watch.wait_for(f"{name} deleted", lambda n=name: n not in watch.present)
            time.sleep(rng.uniform(1.0, 2.0))
        time.sleep(args.settle)
        burst = run_burst(core, watch, namespace, args)
        print(f"[{tag}] burst: first bind {burst['first_bind_s']:.2f} s, all {burst['all_bound_s']:.2f} s",
              file=sys.stderr)  # fmt: skip
    finally:
        watch.stop.set()
        with contextlib.suppress(Exception):
            core.delete_namespace(namespace, propagation_policy="Background")
    # The burst's cycles are those after the last single pod's bind (each single was deleted).
    burst["after_singles"] = max(watch.bound.get(f"single-{i:03d}", 0.0) for i in range(args.samples))
    return {"singles": singles, **summary(singles), "burst": burst}


def run_burst(core: Any, watch: LatencyWatch, namespace: str, args: argparse.Namespace) -> dict[str, Any]:
    names = [f"burst-{i:04d}" for i in range(args.burst)]
    sent: dict[str, float] = {}

    def create(name: str) -> None:
        sent[name] = time.monotonic()
        core.create_namespaced_pod(namespace, pod_body(name, args), _preload_content=False).read()

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, names))
    watch.wait_for("the burst bound", lambda: all(n in watch.bound for n in names), timeout=300)
    first = min(sent.values())
    binds = sorted(watch.bound[n] for n in names)
    return {
        "pods": len(names),
        "created_s": max(sent.values()) - first,
        "last_created": max(sent.values()),
        "after_last_create_s": binds[-1] - max(sent.values()),
        "first_bind_s": binds[0] - first,
        "all_bound_s": binds[-1] - first,
        "spread_s": binds[-1] - binds[0],
        "started": first,
        "ended": binds[-1],
    }


def summary(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {}
    ordered = sorted(samples)
    return {
        "median_s": statistics.median(ordered),
        "p50_s": ordered[max(0, int(round(0.5 * len(ordered))) - 1)],
        "p90_s": ordered[max(0, int(round(0.9 * len(ordered))) - 1)],
        "min_s": ordered[0],
        "max_s": ordered[-1],
    }


def wait_default_account(core: Any, namespace: str) -> None:
    """Pods are refused until the namespace's default ServiceAccount exists."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(a.metadata.name == "default" for a in core.list_namespaced_service_account(namespace).items):
            return
        time.sleep(0.2)
    raise SystemExit(f"no default ServiceAccount in {namespace} after 60 s")


# ----- the portal's database (created here, dropped here) ---------------------------------------


@contextlib.contextmanager
def own_database() -> Iterator[str]:
    """A PostgreSQL database this script creates under a fresh name and drops at the end.

    Only the server and credentials of ``TEST_DATABASE_URL`` are used; the database it names is
    never opened. A name that exists already is refused, not reused."""
    import dj_database_url
    import psycopg

    url = os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    cfg = dj_database_url.parse(url)
    if cfg["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit("kwok_latency.py runs the portal on PostgreSQL: set TEST_DATABASE_URL to a "
                         "postgres:// URL (only its server and user are used)")  # fmt: skip
    name = f"kai_bench_latency_{secrets.token_hex(4)}"
    connect = {"host": cfg["HOST"], "port": cfg["PORT"] or 5432, "user": cfg["USER"],
               "password": cfg["PASSWORD"] or None, "dbname": "postgres", "autocommit": True}  # fmt: skip
    with psycopg.connect(**connect) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            raise SystemExit(f"database {name} exists: kwok_latency.py only uses databases it creates")
        admin.execute(f'CREATE DATABASE "{name}"')
    user = cfg["USER"] or "postgres"
    password = f":{cfg['PASSWORD']}" if cfg["PASSWORD"] else ""
    try:
        yield f"postgres://{user}{password}@{cfg['HOST']}:{cfg['PORT'] or 5432}/{name}"
    finally:
        with psycopg.connect(**connect) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def portal_env(database_url: str, kubeconfig: Path, args: argparse.Namespace) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "kai_portal.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/6"),
        "SECRET_KEY": secrets.token_hex(32),
        "DEBUG": "0",
        "CLUSTER_BACKEND": "kubernetes",
        "SCHEDULER_NAME": args.scheduler_name,
        "KUBECONFIG": str(kubeconfig),
        "LOG_LEVEL": "WARNING",
    }


def prepare_portal(env: dict[str, str], args: argparse.Namespace, gpus: int) -> None:
    python = str(REPO / ".venv" / "bin" / "python")
    manage = str(REPO / "manage.py")
    subprocess.run([python, manage, "migrate", "--noinput", "-v", "0"], env=env, check=True, cwd=REPO)
    code = (
        "from kai_portal.queues.models import Queue; "
        f"Queue.objects.get_or_create(name={args.queue!r}, defaults={{'gpu_quota': {gpus}}})"
    )
    subprocess.run([python, manage, "shell", "-c", code], env=env, check=True, cwd=REPO)


@contextlib.contextmanager
def portal_scheduler(env: dict[str, str], loop: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    extra_args, extra_env, _ = LOOPS[loop]
    python = str(REPO / ".venv" / "bin" / "python")
    with log.open("wb") as out:
        command = [python, str(REPO / "manage.py"), "run_scheduler", *extra_args]
        env = {**env, **extra_env}
        proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def binding_cycles(database_url: str, burst: dict[str, Any], wall_offset: float) -> tuple[int, int]:
    """Cycles of the portal that bound pods after the last single pod's bind (the burst's), and of
    those, the ones that started after the burst's last create (one: the rest went in one cycle)."""
    import psycopg

    after = datetime.fromtimestamp(burst["after_singles"] + wall_offset, UTC)
    complete = datetime.fromtimestamp(burst["last_created"] + wall_offset, UTC)
    query = "SELECT count(*) FROM scheduling_schedulingcycle WHERE allocated_count > 0 AND started_at > %s"
    with psycopg.connect(database_url) as conn:
        counts = [(conn.execute(query, [moment]).fetchone() or (0,))[0] for moment in (after, complete)]
    return int(counts[0]), int(counts[1])


def wait_cycles_recorded(database_url: str) -> None:
    """The last cycle has persisted (its binds went out before its record is written)."""
    import psycopg

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT count(*) FROM scheduling_schedulingcycle WHERE status = 'running'")
            if not (row.fetchone() or (0,))[0]:
                return
        time.sleep(0.5)


def wait_first_cycle(database_url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """The scheduler process is up (Django loaded, first lists made) once a cycle succeeded."""
    import psycopg

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the portal's scheduler exited ({proc.returncode}); see {log}")
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT count(*) FROM scheduling_schedulingcycle WHERE status = 'succeeded'")
            if (row.fetchone() or (0,))[0]:
                return
        time.sleep(0.5)
    raise SystemExit(f"no scheduling cycle succeeded in 300 s; see {log}")


def ensure_namespace(core: Any, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except ApiException as error:
        if error.status != 409:
            raise


# ----- the report --------------------------------------------------------------------------------


def load_results() -> dict[str, Any]:
    if OUT_JSON.exists():
        return dict(json.loads(OUT_JSON.read_text(encoding="utf-8")))
    return {}


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render(results: dict[str, Any]) -> str:
    lines = [
        "# Create -> bound latency on an idle KWOK cluster",
        "",
        "Generated by `benchmarks/kwok_latency.py` (`make bench-latency`; do not edit by hand). Each row "
        "is one scheduler measured on a control plane of `deploy/k8s-testbed/k8s-up.sh` (etcd, "
        "kube-apiserver, kube-controller-manager, KWOK) with KWOK nodes x 8 GPUs, Ready and untainted "
        "first. Single: one one-GPU pod created on the idle cluster, from just before the create "
        "request to a watch seeing `spec.nodeName`; each pod deleted before the next, 1-2 s apart. "
        "Burst: pods created at once by 16 threads; times after the first create. Rows measured in "
        "the same run share its time stamp.",
        "",
        "| scheduler | run (UTC) | nodes | samples | single median s | p50 s | p90 s | max s | burst pods "
        "| creating them s | first bind s | all bound s | last bind - last create s "
        "| portal cycles that bound the burst | of those, started after the last create "
        "| load average before, after |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, r in results.items():
        b = r.get("burst") or {}
        cycles, after = b.get("binding_cycles"), b.get("cycles_after_last_create")
        lines.append(
            f"| {label} | {r['run']} | {r['nodes']} | {len(r['singles'])} | {fmt(r.get('median_s'))} "
            f"| {fmt(r.get('p50_s'))} | {fmt(r.get('p90_s'))} | {fmt(r.get('max_s'))} | {b.get('pods', '-')} "
            f"| {fmt(b.get('created_s'))} | {fmt(b.get('first_bind_s'))} | {fmt(b.get('all_bound_s'))} "
            f"| {fmt(b.get('after_last_create_s'))} | {'-' if cycles is None else cycles} "
            f"| {'-' if after is None else after} | {r['load_before']}, {r['load_after']} |"
        )
    lines += ["", "What each row ran:", ""]
    for label, r in results.items():
        what = "" if r["what"] == label else f": {r['what']}"
        lines.append(f"- **{label}**{what} ({r['machine']}).")
    lines += [
        "",
        "Goal (issue 29): single-pod median <= 1.1 s on an idle 40-node cluster, and the burst still "
        "bound within one cycle of the first bind. For scale, issue 29 measured KAI's own scheduler "
        "and binder (built from KAI's source) at p50 1.10 s / p90 1.68 s on such a cluster; a row "
        "measured here with `--external` puts it beside these. Load averages are of this 2-core "
        "machine, shared with other work: compare rows of one run.",
        "",
    ]
    return "\n".join(lines)


def record(label: str, result: dict[str, Any]) -> None:
    results = load_results()
    results[label] = result
    OUT_JSON.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    OUT_MD.write_text(render(results), encoding="utf-8")


# ----- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--burst", type=int, default=300)
    ap.add_argument("--kubeconfig", help="a running cluster (default: start one in var/k8s-latency)")
    ap.add_argument("--external", action="store_true", help="only create pods and measure; schedule nothing")
    ap.add_argument("--label", help="the row's name (default: the loop's, or 'external')")
    ap.add_argument("--loop", action="append", choices=sorted(LOOPS), help="a portal loop (repeatable)")
    ap.add_argument("--scheduler-name", default="kai-scheduler")
    ap.add_argument("--queue-label", default="kai.scheduler/queue")
    ap.add_argument("--queue", default="bench-latency")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds of idle before the samples")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--keep-nodes", action="store_true", help="leave the KWOK nodes (a running cluster)")
    args = ap.parse_args(argv)
    from kubernetes import client, config

    state = REPO / "var" / "k8s-latency"
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else start_cluster(state)
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    cfg.connection_pool_maxsize = 24
    api_client = client.ApiClient(cfg)
    core = client.CoreV1Api(api_client)
    machine = f"CPython {platform.python_version()}, {os.cpu_count()} cores shared with other work"
    nodes: list[str] = []
    try:
        nodes = make_nodes(core, args.nodes, secrets.token_hex(3), 8)
        wait_ready(core, nodes, timeout=max(120.0, args.nodes * 0.5))
        run_at = f"{datetime.now(UTC):%Y-%m-%d %H:%M}"
        if args.external:
            before = [round(x, 2) for x in os.getloadavg()]
            result = measure(core, api_client, args, "external")
            record(args.label or "external", {
                **result, "run": run_at, "nodes": args.nodes, "machine": machine,
                "what": f"pods for schedulerName {args.scheduler_name}, scheduled by whatever runs against "
                        "the cluster (--external)",
                "load_before": before, "load_after": [round(x, 2) for x in os.getloadavg()],
            })  # fmt: skip
        else:
            ensure_namespace(core, "kai-portal")  # the leader-election Lease lives there
            for loop in args.loop or ["poll", "event"]:
                with own_database() as database_url:
                    env = portal_env(database_url, kubeconfig, args)
                    prepare_portal(env, args, args.nodes * GPUS_PER_NODE)
                    before = [round(x, 2) for x in os.getloadavg()]
                    log = REPO / "var" / f"kwok-latency-{loop}.log"
                    log.parent.mkdir(exist_ok=True)
                    with portal_scheduler(env, loop, log) as proc:
                        wait_first_cycle(database_url, proc, log)
                        result = measure(core, api_client, args, loop)
                        wait_cycles_recorded(database_url)
                    wall_offset = time.time() - time.monotonic()
                    burst = result["burst"]
                    burst["binding_cycles"], burst["cycles_after_last_create"] = binding_cycles(
                        database_url, burst, wall_offset
                    )
                    label = args.label if args.label and len(args.loop or []) == 1 else f"portal: {loop}"
                    record(label, {
                        **result, "run": run_at, "nodes": args.nodes, "machine": machine,
                        "what": LOOPS[loop][2],
                        "load_before": before, "load_after": [round(x, 2) for x in os.getloadavg()],
                    })  # fmt: skip
    finally:
        if not args.keep_nodes:
            for name in nodes:
                with contextlib.suppress(Exception):
                    core.delete_node(name)
        api_client.close()
        if not args.kubeconfig:
            stop_cluster(state)
    print(OUT_MD.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
