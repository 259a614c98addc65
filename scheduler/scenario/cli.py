"""The command line: ``python -m scheduler.scenario run FILE.yaml [--json]`` prints one
scenario's outcome; ``python -m scheduler.scenario check FILE_OR_DIR...`` checks them."""

from __future__ import annotations

import argparse
import json
import sys

from scheduler.result import CycleResult
from scheduler.scenario.checker import check
from scheduler.scenario.loader import load
from scheduler.scenario.runner import run
from scheduler.scenario.schema import ScenarioError


def _print_human(result: CycleResult) -> None:
    for name, t in result.tasks.items():
        where = f" on {t.node}" + (f" gpu {list(t.gpu_devices)}" if t.gpu_devices else "") if t.node else ""
        reason = f": {t.reason}" if t.reason else ""
        print(f"{name} [{t.job}] {t.status.value}{where}{reason}")
    for name, q in result.queues.items():
        print(f"queue {name}: fair_share {q.fair_share} allocated {q.allocated} requested {q.requested}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler.scenario")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run one scenario and print the outcome")
    p_run.add_argument("file")
    p_run.add_argument("--json", action="store_true")
    p_check = sub.add_parser("check", help="compare scenarios with their expected block")
    p_check.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "run":
        try:
            result = run(load(args.file))
        except ScenarioError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(result.to_json(), indent=2))
        else:
            _print_human(result)
        return 0
    _passed, failed = check(args.paths)
    return 1 if failed else 0
