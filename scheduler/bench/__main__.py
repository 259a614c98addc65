"""python -m scheduler.bench [--quick] [--only NAME ...] [--reps N] [--out FILE.json] [--readme FILE.md]

Full run (about 6-10 minutes): every workload, then packing quality and fairness; writes
benchmarks/results.json and benchmarks/README.md. --quick: small sizes only (seconds), writes
benchmarks/results-quick.json and no README unless --readme is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from scheduler.bench.report import machine, render, workload_table
from scheduler.bench.runner import run_workload
from scheduler.bench.workloads import Workload, all_workloads

QUALITY_RESERVE_S = 150.0


def select(quick: bool, only: list[str] | None) -> list[Workload]:
    ws = all_workloads()
    if only:
        return [w for w in ws if any(o in w.name or o == w.group for o in only)]
    return [w for w in ws if w.quick] if quick else ws


def run_quality(quick: bool, packing_instances: int | None) -> dict[str, Any]:
    from scheduler.bench.quality import fairness_steady_state, packing_quality

    out: dict[str, Any] = {"errors": []}
    try:
        out["packing"] = packing_quality(packing_instances or (8 if quick else 40))
    except ImportError as exc:
        out["errors"].append(f"packing quality needs the dev dependency ortools: {exc}")
    except Exception:
        out["errors"].append("packing: " + traceback.format_exc(limit=3))
    try:
        if quick:
            out["fairness"] = fairness_steady_state(horizon_s=2 * 3600, warmup_s=1800, step_s=60)
        else:
            out["fairness"] = fairness_steady_state(horizon_s=4 * 3600, warmup_s=3600, step_s=60)
    except Exception:
        out["errors"].append("fairness: " + traceback.format_exc(limit=3))
    return out


# Over 80 lines: the options, then one pass over the chosen workloads and the report, in order.
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scheduler.bench")
    ap.add_argument("--quick", action="store_true", help="small sizes only (seconds)")
    ap.add_argument("--only", action="append", help="run workloads whose name contains this (or group)")
    ap.add_argument("--reps", type=int, help="repetitions per workload (default: per workload)")
    ap.add_argument("--rep-budget", type=float, help="stop repeating a workload after this many seconds")
    ap.add_argument("--budget", type=float, help="seconds for the whole run (default 840 full, 180 quick)")
    ap.add_argument("--timeout", type=float, help="seconds per workload (default: per workload)")
    ap.add_argument("--no-quality", action="store_true", help="skip packing quality and fairness")
    ap.add_argument("--packing-instances", type=int)
    ap.add_argument("--no-isolate", action="store_true", help="run workloads in this process (no timeout)")
    ap.add_argument("--out", help="results JSON (default benchmarks/results.json, -quick.json with --quick)")
    ap.add_argument("--readme", help="Markdown report (default benchmarks/README.md on a full run)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = ap.parse_args(argv)

    workloads = select(args.quick, args.only)
    if args.list:
        for w in all_workloads():
            print(f"{w.group:<14} {w.name:<40} quick={w.quick} reps={w.reps} timeout={w.timeout_s:g}s")
        return 0
    full = not args.quick and not args.only
    out = Path(args.out or ("benchmarks/results.json" if full else "benchmarks/results-quick.json"))
    readme = Path(args.readme) if args.readme else (Path("benchmarks/README.md") if full else None)
    budget = args.budget or (180.0 if args.quick else 840.0)
    rep_budget = args.rep_budget or (3.0 if args.quick else 20.0)
    quality = not args.no_quality
    started = time.perf_counter()
    deadline = started + budget - (QUALITY_RESERVE_S if quality and not args.quick else 0.0)

    # The last run's medians (the file about to be replaced), shown beside the new ones.
    before: dict[str, Any] = {}
    before_cpu: dict[str, Any] = {}
    if out.exists():
        try:
            old = json.loads(out.read_text(encoding="utf-8"))
            before = {r["name"]: r["cycle_ms"].get("median") for r in old.get("workloads", [])}
            before_cpu = {r["name"]: r.get("cycle_cpu_ms") for r in old.get("workloads", [])}
        except (ValueError, KeyError, TypeError):
            before, before_cpu = {}, {}
    rows = []
    for w in workloads:
        left = deadline - time.perf_counter()
        timeout = max(5.0, min(args.timeout or w.timeout_s, left))
        print(f"[bench] {w.name} (timeout {timeout:.0f}s) ...", file=sys.stderr, flush=True)
        row = run_workload(
            w, reps=args.reps, rep_budget_s=rep_budget, timeout_s=timeout, isolate=not args.no_isolate
        )
        row["previous_median_ms"] = before.get(w.name)
        row["previous_cpu_ms"] = before_cpu.get(w.name)
        rows.append(row)
        print(
            f"[bench]   {row['status']} median {row['cycle_ms']['median']} ms, "
            f"check {'OK' if row['check'].get('ok') else 'FAIL'}: {row['check'].get('detail')}",
            file=sys.stderr,
            flush=True,
        )
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else ("partial" if args.only else "full"),
        "machine": machine(),
        "workloads": rows,
    }
    if quality:
        print("[bench] quality: packing and fairness ...", file=sys.stderr, flush=True)
        results["quality"] = run_quality(args.quick, args.packing_instances)
    results["duration_s"] = round(time.perf_counter() - started, 1)
    results["load_average_end"] = machine().get("load_average")
    results["all_correct"] = all(r["status"] == "ok" and r["check"].get("ok") for r in rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print("\n".join(workload_table(rows)))
    q = results.get("quality") or {}
    if q.get("packing"):
        p = q["packing"]
        print(
            f"packing: mean ratio {p['mean_ratio']} (same order {p['mean_ratio_same_order']}), "
            f"min {p['min_ratio']}"
        )
    if q.get("fairness"):
        f = q["fairness"]
        print(f"fairness: max dev {f['max_abs_dev']} GPUs, mean {f['mean_abs_dev']}, Jain {f['jain']}")
    for e in q.get("errors", []):
        print(f"quality error: {e}", file=sys.stderr)
    print(f"wrote {out}")
    if readme:
        readme.parent.mkdir(parents=True, exist_ok=True)
        readme.write_text(render(results), encoding="utf-8")
        print(f"wrote {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
