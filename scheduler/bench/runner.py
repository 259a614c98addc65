"""Time workloads: each in its own process (fork) with a time budget, so a slow or
hung case is recorded as timed out instead of stopping the benchmark."""

from __future__ import annotations

import gc
import multiprocessing as mp
import resource
import statistics
import sys
import time
import traceback
from typing import Any

from scheduler.bench.workloads import Workload, size_of
from scheduler.cycle import open_session, run_cycle
from scheduler.model import TaskState
from scheduler.simulate.records import percentile


def _read_status(key: str) -> float | None:
    """VmRSS / VmHWM of this process in MiB (Linux), None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
        return True
    except OSError:
        return False


def _peak_mib() -> float:
    hwm = _read_status("VmHWM")
    if hwm is not None:
        return hwm
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru / (1024 * 1024) if sys.platform == "darwin" else ru / 1024


def decisions_of(result: Any) -> int:
    """Task decisions of a cycle: placements (allocated or pipelined) and evictions."""
    placed = sum(1 for t in result.tasks.values() if t.status in (TaskState.ALLOCATED, TaskState.PIPELINED))
    return placed + len(result.evictions)


def measure(w: Workload, reps: int, rep_budget_s: float, send: Any) -> None:
    """Build and run the workload ``reps`` times (fewer when ``rep_budget_s`` is spent after the
    first); report each repetition through ``send`` as it finishes."""
    _reset_peak()
    base_rss = _read_status("VmRSS") or 0.0
    start = time.perf_counter()
    for rep in range(reps):
        gc.collect()
        t0 = time.perf_counter()
        snap = w.build()
        t1 = time.perf_counter()
        c1 = time.process_time()
        open_session(snap, w.config, "default")  # snapshot -> session state and fair shares
        gc.collect(0)  # the collection the engine defers while it runs (``gc_pause.gc_paused``)
        t2 = time.perf_counter()
        c2 = time.process_time()
        result = run_cycle(snap, w.config)
        gc.collect(0)
        t3 = time.perf_counter()
        c3 = time.process_time()
        msg: dict[str, Any] = {
            "rep": rep,
            "build_ms": (t1 - t0) * 1000,
            "session_ms": (t2 - t1) * 1000,
            "cycle_ms": (t3 - t2) * 1000,
            # CPU time of this process: what other work on a shared machine inflates least
            "cycle_cpu_ms": (c3 - c2) * 1000,
            # the cycle less its session (same state, timed alone just before): pools, actions, result
            "after_session_cpu_ms": ((c3 - c2) - (c2 - c1)) * 1000,
            "decisions": decisions_of(result),
            "counters": dict(result.counters),
        }
        if rep == 0:
            msg["size"] = size_of(snap)
            msg["check"] = w.check(snap, result).to_json()
        msg["peak_rss_mib"] = _peak_mib()
        msg["base_rss_mib"] = base_rss
        send(msg)
        del snap, result
        if time.perf_counter() - start > rep_budget_s:
            break


def _child(w: Workload, reps: int, rep_budget_s: float, conn: Any) -> None:
    try:
        measure(w, reps, rep_budget_s, conn.send)
        conn.send({"done": True})
    except Exception:  # report, do not hang the parent
        conn.send({"error": traceback.format_exc(limit=5)})
    finally:
        conn.close()


def summarise(
    w: Workload, msgs: list[dict[str, Any]], status: str, error: str | None, wall_s: float
) -> dict[str, Any]:
    reps = [m for m in msgs if "rep" in m]
    first = reps[0] if reps else {}
    cyc = sorted(m["cycle_ms"] for m in reps)
    med = statistics.median(cyc) if cyc else None
    decisions = first.get("decisions")
    row: dict[str, Any] = {
        "group": w.group,
        "name": w.name,
        "status": status,
        "actions": list(w.config.actions),
        "size": first.get("size", {}),
        "reps": len(reps),
        "build_ms": _r(statistics.median([m["build_ms"] for m in reps])) if reps else None,
        "session_ms": _r(statistics.median([m["session_ms"] for m in reps])) if reps else None,
        "cycle_ms": {"median": _r(med), "p95": _r(percentile(cyc, 95)), "min": _r(cyc[0] if cyc else None)},
        "cycle_cpu_ms": _r(statistics.median([m["cycle_cpu_ms"] for m in reps])) if reps else None,
        "after_session_cpu_ms": (
            _r(statistics.median([m["after_session_cpu_ms"] for m in reps])) if reps else None
        ),
        "decisions": decisions,
        "decisions_per_s": _r(decisions / (med / 1000)) if decisions and med else (0 if reps else None),
        "counters": first.get("counters", {}),
        "peak_rss_mib": _r(max((m["peak_rss_mib"] for m in reps), default=None)),
        "peak_rss_above_start_mib": _r(
            max((m["peak_rss_mib"] - m["base_rss_mib"] for m in reps), default=None)
        ),
        "check": first.get("check", {"ok": False, "detail": status if status != "ok" else "no result"}),
        "timeout_s": w.timeout_s,
        "wall_s": _r(wall_s),
    }
    if error:
        row["error"] = error
    return row


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def run_workload(
    w: Workload,
    reps: int | None = None,
    rep_budget_s: float = 30.0,
    timeout_s: float | None = None,
    isolate: bool = True,
) -> dict[str, Any]:
    """One workload's row. ``isolate`` runs it in a forked process killed at ``timeout_s``."""
    reps = reps or w.reps
    timeout = timeout_s if timeout_s is not None else w.timeout_s
    msgs: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    if not isolate or "fork" not in mp.get_all_start_methods():
        error = None
        try:
            measure(w, reps, rep_budget_s, msgs.append)
            status = "ok"
        except Exception:
            status, error = "error", traceback.format_exc(limit=5)
        return summarise(w, msgs, status, error, time.perf_counter() - t0)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(w, reps, rep_budget_s, child), daemon=True)
    proc.start()
    child.close()
    status, error = "timeout", None
    deadline = t0 + timeout
    try:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0 or not parent.poll(left):
                break
            try:
                msg = parent.recv()
            except EOFError:
                status, error = "error", f"worker exited with code {proc.exitcode}"
                break
            if msg.get("done"):
                status = "ok"
                break
            if "error" in msg:
                status, error = "error", msg["error"]
                break
            msgs.append(msg)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
    if status == "timeout":
        if msgs:  # some repetitions finished: keep them, say the rest ran out of time
            status = "ok"
            error = f"stopped after {len(msgs)} repetition(s): time budget of {timeout:g} s spent"
        else:
            error = f"no answer within {timeout:g} s"
    return summarise(w, msgs, status, error, time.perf_counter() - t0)
