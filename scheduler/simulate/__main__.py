"""python -m scheduler.simulate: play a trace through the engine in simulated time.

    python -m scheduler.simulate run TRACE.csv|TRACE.yaml [--cluster SCENARIO.yaml]
        [--nodes 16 --gpus 8] [--step 30] [--until S] [--set-quota QUEUE=GPUS ...] [--json OUT]
    python -m scheduler.simulate generate [--queues a,b,c,d] [--nodes 16 --gpus 8]
        [--horizon 14400] [--load 1.3] [--seed 1] [-o TRACE.csv]

``run`` may be left out: ``python -m scheduler.simulate TRACE.csv``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler import scenario
from scheduler.model import Config, Node, Queue, QueueResource, Snapshot
from scheduler.simulate.core import simulate, with_quotas
from scheduler.simulate.records import Arrival, SimResult
from scheduler.simulate.trace import TraceError, generate, load, to_csv


def default_cluster(arrivals: Sequence[Arrival], nodes: int, gpus: int) -> Snapshot:
    """``nodes`` x ``gpus``; one top-level queue per queue named in the trace, equal quotas."""
    names = sorted({a.queue for a in arrivals})
    cap = nodes * gpus
    quota = cap // max(1, len(names))
    queues = [
        Queue(n, resources={"gpu": QueueResource(quota=quota)}, created_index=i) for i, n in enumerate(names)
    ]
    return Snapshot([Node(f"node-{i:03d}", gpus=gpus) for i in range(nodes)], queues)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def print_report(res: SimResult, label: str = "", out: Any = None) -> None:
    out = out or sys.stdout
    s = res.summary()
    head = f"== {label} ==" if label else "=="
    print(head, file=out)
    print(
        f"simulated {s['end_s']:.0f} s in {s['cycles']} cycles ({s['engine_cycles']} engine runs); "
        f"capacity {s['capacity_gpu']:g} GPUs; utilisation {100 * s['utilisation']:.1f}%",
        file=out,
    )
    j = s["jobs"]
    print(
        f"jobs: {j['finished']} finished, {j['running']} running, {j['pending']} pending; "
        f"evictions {s['evictions']} {s['evictions_by_reason'] or ''} (restarts {s['restarts']})",
        file=out,
    )
    print(f"cycles with a double-booked GPU: {s['double_booked_gpu_cycles']}", file=out)
    print(
        f"GPU-seconds: run {s['gpu_seconds_run']:.0f}, allocation integral {s['gpu_seconds_allocated']:.0f}",
        file=out,
    )
    print(f"{'queue':<16}{'jobs':>6}{'started':>9}{'wait p50 s':>12}{'wait p95 s':>12}", file=out)
    for q, w in s["wait"].items():
        print(
            f"{q:<16}{w['jobs']:>6}{w['started']:>9}{_fmt(w['median_s']):>12}{_fmt(w['p95_s']):>12}", file=out
        )
    f = res.fairness()
    print(
        f"fairness over {f['samples']} saturated cycles: max |alloc - fair share| {f['max_abs_dev']:g} GPUs, "
        f"mean {f['mean_abs_dev']:g}, Jain {f['jain']:.4f}",
        file=out,
    )
    for q, v in f["queues"].items():
        print(
            f"  {q:<14} allocated {v['mean_allocated']:>8.2f}  fair share {v['mean_fair_share']:>8.2f}"
            f"  ratio {v['normalised_share']:.3f}",
            file=out,
        )
    # allocation over time, 12 points
    if res.samples:
        k = max(1, len(res.samples) // 12)
        pts = ", ".join(f"{x.t:.0f}s:{x.allocated_gpu:g}" for x in res.samples[::k])
        print(f"allocated GPUs over time: {pts}", file=out)


def _cluster(
    args: argparse.Namespace, arrivals: Sequence[Arrival], embedded: dict[str, Any] | None
) -> tuple[Snapshot, Config | None]:
    if args.cluster:
        sc = scenario.load(args.cluster)
        return sc.snapshot, sc.config
    if embedded:
        data = {"name": "trace cluster", **embedded}
        sc = scenario.parse(data, args.trace)
        return sc.snapshot, sc.config
    return default_cluster(arrivals, args.nodes, args.gpus), None


def cmd_run(args: argparse.Namespace) -> int:
    try:
        arrivals, embedded = load(args.trace)
        snap, cfg = _cluster(args, arrivals, embedded)
    except (TraceError, scenario.ScenarioError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    runs: list[tuple[str, SimResult]] = [
        ("baseline", simulate(snap, arrivals, args.step, config=cfg, until_s=args.until))
    ]
    if args.set_quota:
        quotas = {}
        for item in args.set_quota:
            q, _, v = item.partition("=")
            quotas[q] = float(v)
        try:
            changed = with_quotas(snap, quotas)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        label = "what-if " + ", ".join(f"{q} quota {v:g}" for q, v in quotas.items())
        runs.append((label, simulate(changed, arrivals, args.step, config=cfg, until_s=args.until)))
    for label, res in runs:
        print_report(res, label)
    if args.json:
        payload = {label: res.to_json(series_every=args.series_every) for label, res in runs}
        Path(args.json).write_text(json.dumps(payload, indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    queues = [q for q in args.queues.split(",") if q]
    arrivals = generate(
        queues,
        args.nodes * args.gpus,
        horizon_s=args.horizon,
        load=args.load,
        median_duration_s=args.median_duration,
        seed=args.seed,
    )
    text = to_csv(arrivals)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {len(arrivals)} arrivals to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in ("run", "generate", "-h", "--help"):
        argv.insert(0, "run")
    parser = argparse.ArgumentParser(prog="python -m scheduler.simulate")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="play a trace and report waits, allocation, evictions, fairness")
    p.add_argument("trace")
    p.add_argument("--cluster", help="scenario-format YAML giving nodes, queues (and jobs already there)")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--step", type=float, default=30.0, help="seconds between cycles")
    p.add_argument("--until", type=float, default=None, help="stop at this simulated time")
    p.add_argument(
        "--set-quota", action="append", metavar="QUEUE=GPUS", help="what-if: also run with this quota"
    )
    p.add_argument("--json", help="write the full result (series included) to this file")
    p.add_argument("--series-every", type=int, default=1)
    g = sub.add_parser("generate", help="write a synthetic trace (CSV)")
    g.add_argument("--queues", default="team-a,team-b,team-c,team-d")
    g.add_argument("--nodes", type=int, default=16)
    g.add_argument("--gpus", type=int, default=8)
    g.add_argument("--horizon", type=float, default=4 * 3600)
    g.add_argument("--load", type=float, default=1.3)
    g.add_argument("--median-duration", type=float, default=1800.0)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("-o", "--output")
    args = parser.parse_args(argv)
    return cmd_run(args) if args.command == "run" else cmd_generate(args)


if __name__ == "__main__":
    sys.exit(main())
