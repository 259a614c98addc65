"""Running a scenario: one scheduling cycle, or ``config.rounds`` of them."""

from __future__ import annotations

from scheduler.cycle import run_rounds
from scheduler.result import CycleResult
from scheduler.scenario.schema import Scenario


def run(scenario: Scenario) -> CycleResult:
    return run_rounds(scenario.snapshot, scenario.config)
