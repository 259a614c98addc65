"""The chart's defaults that need no ``helm`` to check (the render test skips without it)."""

from __future__ import annotations

from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kai-portal"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
CONFIGMAP = (CHART / "templates" / "configmap.yaml").read_text()


def test_the_chart_trusts_one_proxy_by_default_and_passes_it_to_the_settings():
    assert VALUES["config"]["numProxies"] == 1
    assert "NUM_PROXIES: {{ .Values.config.numProxies | quote }}" in CONFIGMAP


def test_the_chart_keeps_metrics_and_the_api_schema_closed_unless_opened():
    assert VALUES["metrics"]["public"] is False and VALUES["config"]["apiSchemaPublic"] is False
    assert 'METRICS_PUBLIC: {{ ternary "1" "0" .Values.metrics.public | quote }}' in CONFIGMAP
    assert 'API_SCHEMA_PUBLIC: {{ ternary "1" "0" .Values.config.apiSchemaPublic | quote }}' in CONFIGMAP
