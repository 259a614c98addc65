"""``kai``: submit jobs from manifests, list your jobs with their reasons, show queue fair shares.

Configuration: ``--url``/``KAI_URL`` (default http://127.0.0.1:8000) and
``--token``/``KAI_TOKEN`` (an API token from your account page).

    kai submit -f train.yaml          submit a Pod or batch/v1 Job manifest ("-" = stdin)
    kai jobs [--all] [--state pending] list my jobs (--all: every job I can see) with reasons
    kai job <uid>                      one job, its pods and their reasons
    kai cancel <uid>                   cancel a job
    kai queues                         queues with quota, deserved, fair share, allocated
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from kai_portal.cli.client import ApiError, Client


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
        )


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if value == -1:
        return "unlimited"
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def _age(stamp: str | None) -> str:
    if not stamp:
        return "-"
    seconds = (datetime.now(UTC) - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(int(seconds), 0)}s"


def _gpus(job: dict[str, Any]) -> str:
    if job.get("gpu_fraction") is not None:
        return f"{_num(job['gpu_fraction'])}x{job['gpu_fraction_devices']}"
    if job.get("gpu_memory_mib") is not None:
        return f"{job['gpu_memory_mib']}MiB"
    return str(job.get("gpu_count", 0))


def cmd_submit(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()  # noqa: SIM115
    job = client.submit("jobs/manifest/", text.encode("utf-8"), content_type="application/yaml")
    out.write(f"job {job['name']} submitted to queue {job['queue']}: {job['uid']} ({job['state']})\n")
    return 0


def cmd_jobs(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    params: dict[str, Any] = {"state": args.state}
    if not args.all:
        params["submitter"] = client.get("me/")["username"]
    rows = [["UID", "NAME", "QUEUE", "STATE", "PODS", "GPUS", "AGE", "REASON"]]
    for job in client.pages("jobs/", **params):
        pods = job["pods"]
        rows.append([
            job["uid"][:8], job["name"], job["queue"], job["state"], f"{pods['running']}/{pods['total']}",
            _gpus(job), _age(job["created_at"]), job["message"] or "-",
        ])  # fmt: skip
    if len(rows) == 1:
        out.write("No jobs.\n")
        return 0
    _table(rows, out)
    return 0


def _find_job(client: Client, uid: str) -> dict[str, Any]:
    if len(uid) >= 32:
        return client.get(f"jobs/{uid}/")  # type: ignore[no-any-return]
    matches = [j for j in client.pages("jobs/") if j["uid"].startswith(uid)]
    if len(matches) != 1:
        raise ApiError(404, f"no single job whose uid starts with {uid!r} ({len(matches)} found)")
    return matches[0]


def cmd_job(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    job = _find_job(client, args.uid)
    out.write(f"{job['name']}  {job['uid']}\n  queue {job['queue']}  state {job['state']}  "
              f"gpus {_gpus(job)}  tasks {job['task_count']} (gang {job['min_member']})\n")  # fmt: skip
    if job["message"]:
        out.write(f"  reason: {job['message']}\n")
    rows = [["POD", "STATE", "NODE", "REASON"]]
    for pod in client.pages(f"jobs/{job['uid']}/pods/"):
        rows.append([pod["name"], pod["state"], pod["node"] or "-", pod["reason"] or "-"])
    _table(rows, out)
    return 0


def cmd_cancel(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    job = _find_job(client, args.uid)
    job = client.post(f"jobs/{job['uid']}/cancel/")
    out.write(f"job {job['name']} is {job['state']}\n")
    return 0


def cmd_queues(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    resource = args.resource
    rows = [["QUEUE", "PARENT", "TEAM", f"{resource.upper()} QUOTA", "LIMIT", "WEIGHT", "DESERVED",
             "FAIR SHARE", "ALLOCATED", "REQUESTED"]]  # fmt: skip
    for q in client.pages("queues/"):
        status = q["status"][resource]
        rows.append([
            q["name"], q["parent"] or "-", q["team"] or "-", _num(q[f"{resource}_quota"]),
            _num(q[f"{resource}_limit"]), _num(q[f"{resource}_over_quota_weight"]), _num(status["deserved"]),
            _num(status["fair_share"]), _num(status["allocated"]), _num(status["requested"]),
        ])  # fmt: skip
    _table(rows, out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kai", description="KAI Portal from the terminal.")
    parser.add_argument("--url", default=os.environ.get("KAI_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("KAI_TOKEN"), help="API token (or KAI_TOKEN)")
    sub = parser.add_subparsers(dest="command", required=True)
    submit = sub.add_parser("submit", help="submit a Pod or batch/v1 Job manifest")
    submit.add_argument("-f", "--file", required=True, help="manifest file, or - for stdin")
    submit.set_defaults(run=cmd_submit)
    jobs = sub.add_parser("jobs", help="list my jobs with their reasons")
    jobs.add_argument("--all", action="store_true", help="every job I can see, not only mine")
    jobs.add_argument("--state", choices=["pending", "running", "succeeded", "failed", "cancelled"])
    jobs.set_defaults(run=cmd_jobs)
    job = sub.add_parser("job", help="one job with its pods and reasons")
    job.add_argument("uid", help="job uid (or a unique prefix)")
    job.set_defaults(run=cmd_job)
    cancel = sub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("uid", help="job uid (or a unique prefix)")
    cancel.set_defaults(run=cmd_cancel)
    queues = sub.add_parser("queues", help="queues with quotas and fair shares")
    queues.add_argument("--resource", choices=["gpu", "cpu", "memory"], default="gpu")
    queues.set_defaults(run=cmd_queues)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    if not args.token:
        err.write("kai: no API token; pass --token or set KAI_TOKEN (create one on your account page)\n")
        return 2
    try:
        return int(args.run(Client(args.url, args.token), args, out))
    except ApiError as exc:
        err.write(f"kai: {exc.message} (HTTP {exc.status})\n" if exc.status else f"kai: {exc.message}\n")
        return 1
    except OSError as exc:
        err.write(f"kai: {exc}\n")
        return 1
