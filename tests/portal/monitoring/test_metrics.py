"""/metrics: parses as Prometheus text, and after real cycles on the simulated cluster it says
what the portal's queue API says, and counts cycles, evictions and refused binds."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from kai_portal.cluster.backends import ApplyReport
from kai_portal.cluster.backends.simulated import SimulatedBackend
from kai_portal.history.models import Decision, SchedulingCycle
from kai_portal.scheduling.lock import LOCK_NAME
from kai_portal.workloads.models import Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db

MIB = 2**20
ROOT = Path(__file__).resolve().parents[3]


def to_base(resource: str, value: str | float) -> float:
    """The API's units (GPUs, millicores, MiB) to the metrics' (GPUs, cores, bytes); -1 = unlimited."""
    number = float(Decimal(str(value)))
    if number == -1:
        return -1.0
    return {"gpu": number, "cpu": number / 1000, "memory": number * MIB}[resource]


@pytest.fixture
def contended(db):
    """8 GPUs, 10 asked for by two teams with different quotas and weights."""
    dept = factories.queue("dept", gpu_quota=-1, cpu_quota=-1, memory_quota=-1)
    a = factories.queue("team-a", parent=dept, display_name="Team A", gpu_quota=2, gpu_over_quota_weight=1,
                        cpu_quota=4_000, memory_quota=8_192)  # fmt: skip
    b = factories.queue("team-b", parent=dept, gpu_quota=0, gpu_over_quota_weight=3, gpu_limit=5)
    factories.node("n1", gpus=8)
    for i in range(7):
        factories.job(a, f"a{i}", duration=timedelta(minutes=30), cpu_millicores=1_500, memory_mib=1_000)
    for i in range(3):
        factories.job(b, f"b{i}", duration=timedelta(minutes=30), cpu_millicores=500, memory_mib=3_000)
    return a, b


def test_metrics_parse_and_match_the_queue_api_after_cycles(loop, contended, scrape, portal_admin):
    loop.run_many(3)

    types, samples = scrape()
    api = APIClient()
    api.force_authenticate(portal_admin)
    queues = {q["name"]: q for q in api.get("/api/v1/queues/?page_size=100").json()["results"]}
    assert set(queues) == {"dept", "team-a", "team-b"}

    assert types["kai_queue_fair_share_gpu"] == "gauge" and types["kai_portal_cycles"] == "counter"
    assert types["kai_portal_cycle_duration_seconds"] == "histogram"
    checked = 0
    for name, queue in queues.items():
        kai = (
            ("queue_display_name", queue["display_name"]),
            ("queue_metadata_name", name),
            ("queue_name", name),
        )
        status = queue["status"]
        assert samples[("kai_queue_info", kai)] == 1
        assert samples[("kai_queue_fair_share_gpu", kai)] == to_base("gpu", status["gpu"]["fair_share"])
        assert samples[("kai_queue_allocated_gpus", kai)] == to_base("gpu", status["gpu"]["allocated"])
        assert samples[("kai_queue_allocated_cpu_cores", kai)] == to_base("cpu", status["cpu"]["allocated"])
        assert samples[("kai_queue_allocated_memory_bytes", kai)] == to_base(
            "memory", status["memory"]["allocated"]
        )
        assert samples[("kai_queue_fair_share_memory_gb", kai)] == pytest.approx(
            to_base("memory", status["memory"]["fair_share"]) / 1e9
        )
        assert samples[("kai_queue_deserved_gpus", kai)] == float(queue["gpu_quota"])
        for r in ("gpu", "cpu", "memory"):
            labels = (("queue_name", name), ("resource", r))
            for field in ("deserved", "fair_share", "allocated", "requested"):
                assert samples[(f"kai_portal_queue_{field}", labels)] == pytest.approx(
                    to_base(r, status[r][field])
                ), (name, r, field)
                checked += 1
            assert samples[("kai_portal_queue_limit", labels)] == to_base(r, queue[f"{r}_limit"])
    assert checked == 3 * 3 * 4

    # Not a vacuous comparison: the two teams got different, non-zero shares of the 8 GPUs.
    a_share = samples[("kai_portal_queue_fair_share", (("queue_name", "team-a"), ("resource", "gpu")))]
    b_share = samples[("kai_portal_queue_fair_share", (("queue_name", "team-b"), ("resource", "gpu")))]
    assert a_share > 0 and b_share > 0 and a_share != b_share
    assert samples[("kai_portal_queue_limit", (("queue_name", "team-b"), ("resource", "gpu")))] == 5

    for name in ("team-a", "team-b"):
        for state in ("pending", "bound", "running", "releasing"):
            expected = Pod.objects.filter(job__queue__name=name, state=state).count()
            assert samples[("kai_portal_queue_pods", (("queue_name", name), ("state", state)))] == expected
    running = sum(
        samples[("kai_portal_queue_pods", (("queue_name", n), ("state", s)))]
        for n in ("team-a", "team-b")
        for s in ("bound", "running")
    )
    assert running == 8

    assert samples[("kai_portal_cycles_total", (("outcome", "succeeded"),))] == 3
    assert samples[("kai_portal_cycle_duration_seconds_count", ())] == 3
    assert samples[("kai_portal_cycle_duration_seconds_bucket", (("le", "+Inf"),))] == 3
    durations = SchedulingCycle.objects.values_list("duration_ms", flat=True)
    assert samples[("kai_portal_cycle_duration_seconds_sum", ())] == pytest.approx(sum(durations) / 1000)
    last = SchedulingCycle.objects.order_by("-started_at").first()
    assert samples[("kai_e2e_scheduling_latency_milliseconds", ())] == last.duration_ms


def test_a_queue_no_cycle_has_seen_has_its_quota_but_no_computed_numbers(db, scrape):
    factories.queue("fresh", gpu_quota=3)
    _, samples = scrape()
    assert samples[("kai_portal_queue_quota", (("queue_name", "fresh"), ("resource", "gpu")))] == 3
    assert not any(name == "kai_portal_queue_fair_share" for name, _ in samples)
    assert samples[("kai_portal_cycles_total", (("outcome", "succeeded"),))] == 0


def test_evictions_are_counted_by_action(loop, scrape, settings):
    settings.SIMULATED_EVICTION_GRACE_SECONDS = 5
    dept = factories.queue("dept", gpu_quota=0)
    a = factories.queue("team-a", parent=dept, gpu_quota=0, gpu_over_quota_weight=1)
    b = factories.queue("team-b", parent=dept, gpu_quota=0, gpu_over_quota_weight=1)
    factories.node("n1", gpus=8)
    for i in range(8):
        factories.job(a, f"a{i}", duration=timedelta(minutes=30))
    loop.run_many(2)
    for i in range(4):
        factories.job(b, f"b{i}", duration=timedelta(seconds=60))
    loop.run_many(4)

    _, samples = scrape()
    reclaims = Decision.objects.filter(kind="evicted", action="reclaim", reason="Evict").count()
    assert reclaims > 0
    assert samples[("kai_portal_evicted_pods_total", (("action", "reclaim"),))] == reclaims
    assert samples[("kai_portal_evicted_pods_total", (("action", "preempt"),))] == 0
    assert samples[("kai_portal_cycles_total", (("outcome", "succeeded"),))] == 6


class RefusesBinds(SimulatedBackend):
    """Refuses every bind of pods named ``flaky-*``, as an API server answering 409 would."""

    def apply(self, binds, evictions, events):
        report = super().apply(binds, evictions, events)
        return ApplyReport(
            [
                dataclasses.replace(r, ok=False, error="409 Conflict", status_code=409)
                if r.operation == "bind" and r.name.startswith("flaky-")
                else r
                for r in report.results
            ]
        )


def test_refused_binds_failed_and_skipped_cycles_are_counted(loop, scrape, monkeypatch):
    leaf = factories.queue("leaf", gpu_quota=4)
    factories.node("n1", gpus=4)
    factories.job(leaf, "flaky")
    factories.job(leaf, "fine")
    backend = RefusesBinds(clock=lambda: loop.now)
    loop.run(backend=backend)
    loop.run(5, backend=backend)

    other = redis.Redis.from_url(settings.REDIS_URL)
    held = other.lock(LOCK_NAME, timeout=30)
    assert held.acquire(blocking=False)
    try:
        assert loop.run(5).status == "skipped"
    finally:
        held.release()
        other.close()

    def fail(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr("kai_portal.scheduling.usage.record_usage", fail)
    with pytest.raises(RuntimeError):
        loop.run(5)

    _, samples = scrape()
    assert samples[("kai_portal_cluster_operation_failures_total", (("operation", "bind"),))] == 2
    assert samples[("kai_portal_cluster_operation_failures_total", (("operation", "evict"),))] == 0
    outcomes = {
        o: samples[("kai_portal_cycles_total", (("outcome", o),))] for o in ("succeeded", "failed", "skipped")
    }
    assert outcomes == {"succeeded": 2, "failed": 1, "skipped": 1}
    # Skipped cycles did not run, so the histogram holds the three that did.
    assert samples[("kai_portal_cycle_duration_seconds_count", ())] == 3


def test_history_pruning_never_lowers_a_counter(loop, scrape):
    leaf = factories.queue("leaf", gpu_quota=1)
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    loop.run_many(2)
    SchedulingCycle.objects.all().delete()  # what prune_history does to old cycles
    _, samples = scrape()
    assert samples[("kai_portal_cycles_total", (("outcome", "succeeded"),))] == 2


def test_metrics_token_protects_the_endpoint_when_set(db, settings, scrape):
    settings.METRICS_TOKEN = "s3cret-token"
    anonymous = Client().get("/metrics")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    _, samples = scrape(HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ("kai_portal_cycles_total", (("outcome", "failed"),)) in samples


def test_probes_answer_by_pod_ip_over_plain_http_even_with_https_redirect_on(db, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["portal.example.com"]
    client = Client()
    for path in ("/healthz", "/readyz", "/metrics"):
        response = client.get(path, HTTP_HOST="10.1.2.3:8000")
        assert response.status_code == 200, (path, response.status_code)
    # Everything else still gets the redirect and host check.
    assert client.get("/queues/", HTTP_HOST="portal.example.com").status_code == 301
    assert client.get("/queues/", HTTP_HOST="10.1.2.3:8000").status_code == 400
    assert client.post("/metrics").status_code == 405


def test_every_metric_the_grafana_dashboard_queries_is_exported(loop, scrape):
    leaf = factories.queue("leaf", gpu_quota=1)
    factories.node("n1", gpus=1)
    factories.job(leaf, "a")
    loop.run()
    _, samples = scrape()
    exported = {name for name, _ in samples}
    labels = {key for _, pairs in samples for key, _ in pairs}

    dashboard = json.loads((ROOT / "deploy" / "grafana" / "kai-portal-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"\bkai_[a-z0-9_]+", expr)}
    assert len(used) >= 10
    assert used <= exported, f"not exported: {sorted(used - exported)}"
    grouped = {label.strip() for expr in exprs for group in re.findall(r"by \(([^)]*)\)", expr)
               for label in group.split(",")}  # fmt: skip
    assert grouped <= labels, f"no such labels: {sorted(grouped - labels)}"
