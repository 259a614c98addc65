"""Fixtures for the monitoring tests: a free cycle lock, a cycle runner, /metrics parsed, and a real
Prometheus scraping a stand-in DCGM exporter."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling.cycle import run_scheduling_cycle
from tests.portal.monitoring.prometheus_server import PROMETHEUS, PrometheusServer, StandInExporter
from tests.portal.scheduling.conftest import free_cycle_lock  # noqa: F401  (autouse here too)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Loop:
    """Runs cycles on the simulated cluster, ``seconds`` apart on a clock that starts now."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def run(self, seconds: float = 0, **kwargs: object) -> SchedulingCycle:
        self.now += timedelta(seconds=seconds)
        return run_scheduling_cycle(now=self.now, **kwargs)  # type: ignore[arg-type]

    def run_many(self, count: int, every: float = 5) -> list[SchedulingCycle]:
        return [self.run(every) for _ in range(count)]


@pytest.fixture(autouse=True)
def metrics_open(settings: Any) -> None:
    """The test settings are production's, where /metrics is closed without a token; these tests
    are about what it says (access: tests/portal/hardening/test_closed_by_default.py)."""
    settings.METRICS_PUBLIC = True


@pytest.fixture
def loop() -> Loop:
    return Loop()


def parse(text: str) -> tuple[dict[str, str], Samples]:
    """``({family: type}, {(sample name, sorted labels): value})`` from Prometheus text."""
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return types, samples


@pytest.fixture
def scrape() -> Callable[..., tuple[dict[str, str], Samples]]:
    """GET /metrics as Prometheus does (no session, the pod's IP as host) and parse it."""

    def get(**headers: str) -> tuple[dict[str, str], Samples]:
        response = Client().get("/metrics", HTTP_HOST="10.1.2.3:8000", **headers)
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=")
        return parse(response.content.decode())

    return get


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: Any) -> Iterator[tuple[PrometheusServer, StandInExporter]]:
    """Debian's Prometheus, started once per test session on a free port, scraping a stand-in DCGM
    exporter (``prometheus_server.py``). Tests set ``exporter.gpus`` and wait for the scrape."""
    if not Path(PROMETHEUS).exists():
        pytest.skip(
            "Debian's prometheus is not installed (.ci/services installs it; apt-get install prometheus)"
        )
    exporter = StandInExporter()
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), exporter)
    try:
        yield server, exporter
    finally:
        server.stop()
        exporter.stop()
