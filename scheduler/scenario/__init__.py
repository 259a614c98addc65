"""Scenario files (shared/docs/scenario-format.md): load, run one cycle (or ``rounds``), check.

python -m scheduler.scenario run FILE.yaml [--json]
python -m scheduler.scenario check FILE_OR_DIR...
"""

from __future__ import annotations

from scheduler.scenario.checker import check, compare, find_files
from scheduler.scenario.cli import main
from scheduler.scenario.loader import load, parse
from scheduler.scenario.runner import run
from scheduler.scenario.schema import Scenario, ScenarioError

__all__ = [
    "Scenario",
    "ScenarioError",
    "check",
    "compare",
    "find_files",
    "load",
    "main",
    "parse",
    "run",
]
