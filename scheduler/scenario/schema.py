"""What every part of a scenario file's reader shares: the error it raises, the scenario it
returns, and the checks of a mapping's keys and of a list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.model import Config, Snapshot


class ScenarioError(ValueError):
    """A scenario file that does not follow the format."""


@dataclass
class Scenario:
    name: str
    path: str
    snapshot: Snapshot
    config: Config
    expected: dict[str, Any]


def check_keys(data: Any, allowed: set[str], where: str, path: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: {where} must be a mapping")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ScenarioError(f"{path}: unknown key {unknown[0]!r} in {where}")
    return data


def as_list(data: Any, where: str, path: str) -> list[Any]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ScenarioError(f"{path}: {where} must be a list")
    return data
