"""GPU use from DCGM through a real Prometheus: what the worker stores per job, and what the job page,
showback and the API show of it (and to whom); and every way Prometheus can fail, which loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from kai_portal.history.models import UsageSample
from kai_portal.monitoring import gpu_use, tasks
from kai_portal.monitoring.models import GpuUseRead, JobGpuUse
from kai_portal.teams.models import Membership
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories
from tests.portal.monitoring.prometheus_server import Gpu, PrometheusServer, StandInExporter, free_port


@pytest.fixture
def world(db: None, django_user_model: Any) -> dict[str, Any]:
    return build_world(django_user_model)


def build_world(django_user_model: Any) -> dict[str, Any]:
    """Two teams, each with a queue; alpha runs a 2-GPU job (busy) and a 1-GPU job DCGM has no series
    for; beta runs a 1-GPU job that is idle. Queue names (the simulated namespaces) are new each
    test, as Prometheus keeps the series of earlier tests."""
    suffix = uuid.uuid4().hex[:6]
    node = factories.node(f"gpu-{suffix}", gpus=8)
    alpha, beta = factories.team("alpha", name="Alpha"), factories.team("beta", name="Beta")
    users = {
        "admin": django_user_model.objects.create_superuser("root", "root@example.com", "pw"),
        "member": django_user_model.objects.create_user("alice", password="pw"),
        "outsider": django_user_model.objects.create_user("bob", password="pw"),
    }
    Membership(team=alpha, user=users["member"]).save()
    Membership(team=beta, user=users["outsider"]).save()
    research = factories.queue(f"research-{suffix}", gpu_quota=8)
    queues = {
        "alpha": factories.queue(f"alpha-{suffix}", parent=research, team=alpha, gpu_quota=4),
        "beta": factories.queue(f"beta-{suffix}", parent=research, team=beta, gpu_quota=4),
    }
    started = timezone.now() - timedelta(hours=2)
    jobs = {
        "busy": factories.job(queues["alpha"], "busy", gpu_count=2, submitter=users["member"]),
        "dark": factories.job(queues["alpha"], "dark", gpu_count=1, submitter=users["member"]),
        "idle": factories.job(queues["beta"], "idle", gpu_count=1, submitter=users["outsider"]),
    }
    for job in jobs.values():
        Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=started)
        Pod.objects.filter(job=job).update(state=PodState.RUNNING, node=node, started_at=started)
    host = node.name
    gpus = [
        Gpu(host, 0, 80, 30_000, queues["alpha"].name, "busy-0"),
        Gpu(host, 1, 60, 10_000, queues["alpha"].name, "busy-0"),
        Gpu(host, 2, 1, 500, queues["beta"].name, "idle-0"),
        Gpu(host, 3, 97, 70_000),  # no pod holds it: not any job's
        Gpu(host, 4, 90, 1_000, queues["beta"].name, "busy-0"),  # a namesake the portal does not know
    ]
    return {"users": users, "queues": queues, "jobs": jobs, "gpus": gpus, "node": node}


@pytest.fixture
def scraped(
    world: dict[str, Any], prometheus: tuple[PrometheusServer, StandInExporter], settings: Any
) -> str:
    """The stand-in exporter serves the world's GPUs and Prometheus has scraped them."""
    server, exporter = prometheus
    exporter.gpus = world["gpus"]
    settings.PROMETHEUS_URL = server.url
    settings.GPU_USE_WINDOW_MINUTES = 1
    names = "|".join(q.name for q in world["queues"].values())
    server.wait_for(f'DCGM_FI_DEV_FB_USED{{namespace=~"{names}"}}', 4)
    server.wait_for(f'DCGM_FI_DEV_GPU_UTIL{{namespace=~"{names}"}}', 4)
    return server.url


def client_for(world: dict[str, Any], persona: str) -> Client:
    client = Client()
    client.force_login(world["users"][persona])
    return client


def page(world: dict[str, Any], persona: str, path: str) -> str:
    response = client_for(world, persona).get(path)
    assert response.status_code == 200, path
    return response.content.decode()


def test_the_worker_stores_each_jobs_mean_use_from_a_real_prometheus(world: dict, scraped: str) -> None:
    read = gpu_use.read_gpu_use()
    assert (read.outcome, read.jobs, read.truncated) == ("ok", 2, False), read.message
    stored = {u.job.name: u for u in JobGpuUse.objects.select_related("job")}
    busy, dark, idle = stored["busy"], stored["dark"], stored["idle"]

    # busy: the mean of its two GPUs, and both GPUs' memory; the namesake pod in another namespace
    # and the GPU no pod holds are no one's here.
    def values(u: JobGpuUse) -> tuple[Any, ...]:
        return (u.gpus_seen, u.mean_utilisation, u.memory_used_mib, u.idle_gpus_seen)

    assert values(busy) == (2, 70.0, 40_000, 0)
    assert values(idle) == (1, 1.0, 500, 1)
    assert values(dark) == (0, None, None, 0)
    assert busy.window_seconds == 60 and busy.read_at == read.attempted_at


def test_the_job_page_shows_allocated_hours_use_and_idle(world: dict, scraped: str) -> None:
    gpu_use.read_gpu_use()
    busy = page(world, "member", f"/jobs/{world['jobs']['busy'].uid}/")
    assert 'data-testid="gpu-use-allocated">2<' in busy
    assert "70.0 %" in busy and "40000 MiB" in busy
    assert 'data-testid="gpu-use-hours">4.0 ' in busy  # 2 GPUs for 2 hours
    assert "gpu-use-idle" not in busy and "gpu-use-note" not in busy and "gpu-use-stale" not in busy
    idle = page(world, "outsider", f"/jobs/{world['jobs']['idle'].uid}/")
    assert 'data-testid="gpu-use-idle"' in idle and "averaged 1.0 % (under 5 %)" in idle
    dark = page(world, "member", f"/jobs/{world['jobs']['dark'].uid}/")
    assert 'data-testid="gpu-use-missing"' in dark and "No DCGM data for this job" in dark
    # The live fragment the page polls carries the same card.
    fragment = client_for(world, "member").get(f"/jobs/{world['jobs']['busy'].uid}/", HTTP_HX_REQUEST="true")
    assert 'data-testid="gpu-use"' in fragment.content.decode()


def test_showback_per_team_and_queue(world: dict, scraped: str) -> None:
    gpu_use.read_gpu_use()
    start = timezone.now() - timedelta(hours=1)
    UsageSample.objects.bulk_create(  # half an hour of alpha's 3 GPUs, a minute apart: 1.5 GPU-hours
        UsageSample(queue=world["queues"]["alpha"], resource="gpu", sampled_at=start + timedelta(minutes=m),
                    allocated=3)
        for m in range(30)
    )  # fmt: skip
    response = client_for(world, "admin").get("/showback/?preset=24h")
    use = response.context["gpu_use"]
    assert {r.name: r.gpu_hours for r in use.teams} == {"Alpha": 1.5, "Beta": 0.0}
    teams = {r.name: (r.allocated_gpus, r.measured_gpus, r.idle_gpus, r.mean_utilisation, r.unmeasured_gpus)
             for r in use.teams}  # fmt: skip
    assert {k: tuple(str(v) for v in t) for k, t in teams.items()} == {
        "Alpha": ("3", "2", "0", "70.0", "1"),  # the dark job's GPU has no data
        "Beta": ("1", "1", "1", "1.0", "0"),
    }
    assert [r.name for r in use.queues][0] == world["queues"]["beta"].name  # idle first
    assert 'data-testid="gpu-use-teams"' in response.content.decode()


def test_one_teams_gpu_use_never_reaches_another_team(world: dict, scraped: str) -> None:
    gpu_use.read_gpu_use()
    alpha_q, beta_q = world["queues"]["alpha"].name, world["queues"]["beta"].name
    member = client_for(world, "member")
    showback = member.get("/showback/")
    assert {r.name for r in showback.context["gpu_use"].queues} == {alpha_q}
    assert {r.name for r in showback.context["gpu_use"].teams} == {"Alpha"}
    assert beta_q not in showback.content.decode()
    assert member.get(f"/jobs/{world['jobs']['idle'].uid}/").status_code == 404
    listed = member.get("/api/v1/gpu-use/").json()
    assert {r["job_name"] for r in listed["results"]} == {"busy", "dark"}
    assert member.get(f"/api/v1/gpu-use/{world['jobs']['idle'].uid}/").status_code == 404
    theirs = client_for(world, "outsider").get("/api/v1/gpu-use/").json()["results"]
    assert [(r["job_name"], r["mean_utilisation"], r["fresh"]) for r in theirs] == [("idle", 1.0, True)]
    assert Client().get("/api/v1/gpu-use/").status_code in (401, 403)


def test_showback_gpu_use_reads_a_fixed_number_of_queries(
    world: dict, scraped: str, django_assert_max_num_queries: Any
) -> None:
    gpu_use.read_gpu_use()
    queue_ids = [q.pk for q in world["queues"].values()]
    with django_assert_max_num_queries(5):
        gpu_use.showback_gpu_use(queue_ids, [])
    for i in range(20):
        job = factories.job(world["queues"]["alpha"], f"more-{i}")
        Pod.objects.filter(job=job).update(state=PodState.RUNNING, node=world["node"])
    gpu_use.read_gpu_use()
    assert JobGpuUse.objects.count() == 23
    with django_assert_max_num_queries(5):
        gpu_use.showback_gpu_use(queue_ids, [])


def test_a_finished_job_keeps_its_last_reading_without_a_stale_mark(world: dict, scraped: str) -> None:
    gpu_use.read_gpu_use()
    Job.objects.filter(pk=world["jobs"]["busy"].pk).update(state=JobState.SUCCEEDED)
    Pod.objects.filter(job=world["jobs"]["busy"]).update(state=PodState.SUCCEEDED, finished_at=timezone.now())
    JobGpuUse.objects.update(read_at=timezone.now() - timedelta(hours=1))
    busy = page(world, "member", f"/jobs/{world['jobs']['busy'].uid}/")
    assert "70.0 %" in busy and "(while it ran)" in busy and "gpu-use-stale" not in busy
    assert 'data-testid="gpu-use-allocated">0<' in busy


def test_the_celery_task_reads_through_prometheus(world: dict, scraped: str) -> None:
    assert tasks.read_gpu_use() == "ok"
    assert JobGpuUse.objects.count() == 3


def test_series_past_the_bound_are_left_out_and_said(world: dict, scraped: str, settings: Any) -> None:
    settings.GPU_USE_MAX_SERIES = 1
    read = gpu_use.read_gpu_use()
    assert read.truncated and "GPU_USE_MAX_SERIES (1)" in read.message
    # The same series each time (sorted by namespace, pod, GPU): alpha's busy-0, GPU 0.
    assert [
        (u.job.name, u.gpus_seen, u.mean_utilisation) for u in JobGpuUse.objects.filter(gpus_seen__gt=0)
    ] == [("busy", 1, 80.0)]


# --- Prometheus down, slow, answering errors or garbage: a clear note, nothing lost -------------------


@pytest.fixture
def read_once(world: dict, scraped: str) -> dict[str, JobGpuUse]:
    """One good read stored, to check that a failed one loses none of it."""
    gpu_use.read_gpu_use()
    return {u.job.name: u for u in JobGpuUse.objects.select_related("job")}


class _Answer(BaseHTTPRequestHandler):
    status = 200
    body = b""
    delay = 0.0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        time.sleep(self.delay)
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_prometheus() -> Iterator[Callable[..., str]]:
    """A server answering the query API as a broken Prometheus would (the real one cannot be made to)."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int = 200, body: bytes = b"", delay: float = 0.0) -> str:
        handler = type("Handler", (_Answer,), {"status": status, "body": body, "delay": delay})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


TIMEOUT = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
MALFORMED = {
    "status": "success",
    "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "many"]}]},
}
BROKEN_ANSWERS: dict[str, tuple[int, bytes, float]] = {
    "slow": (200, b"{}", 3.0),
    "http-error": (503, json.dumps(TIMEOUT).encode(), 0.0),
    "refused-query": (200, b'{"status": "error", "error": "parse error"}', 0.0),
    "html": (200, b"<html>login</html>", 0.0),
    "wrong-shape": (200, b'{"status": "success", "data": {"resultType": "matrix"}}', 0.0),
    "bad-value": (200, json.dumps(MALFORMED).encode(), 0.0),
}


def _closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.mark.parametrize(
    ("case", "outcome", "words"),
    [
        ("down", "unreachable", "cannot be reached"),
        ("slow", "unreachable", "did not answer within 1 s"),
        ("http-error", "error", "answered HTTP 503: query timed out in expression evaluation"),
        ("refused-query", "error", "refused the query: parse error"),
        ("html", "garbage", "not JSON"),
        ("wrong-shape", "garbage", "no instant vector"),
        ("bad-value", "garbage", "a series is malformed"),
    ],
)
def test_a_failed_read_is_said_and_loses_nothing(
    case: str, outcome: str, words: str, world: dict, read_once: dict, settings: Any, fake_prometheus: Any
) -> None:
    settings.GPU_USE_TIMEOUT_SECONDS = 1
    if case == "down":
        settings.PROMETHEUS_URL = _closed_url()
    else:
        status, body, delay = BROKEN_ANSWERS[case]
        settings.PROMETHEUS_URL = fake_prometheus(status, body, delay)
    started = time.monotonic()
    read = gpu_use.read_gpu_use(timezone.now() + timedelta(minutes=5))
    assert time.monotonic() - started < 8  # the timeout holds (two queries at most)
    assert read.outcome == outcome and words in read.message, read.message
    kept = {u.job.name: u for u in JobGpuUse.objects.select_related("job")}
    assert {k: (u.read_at, u.mean_utilisation) for k, u in kept.items()} == {
        k: (u.read_at, u.mean_utilisation) for k, u in read_once.items()
    }
    busy = page(world, "member", f"/jobs/{world['jobs']['busy'].uid}/")
    assert 'data-testid="gpu-use-note"' in busy and words.split(":")[0] in busy
    assert "70.0 %" in busy  # the last good values stay on the page
    showback = client_for(world, "admin").get("/showback/")
    assert showback.context["gpu_use"].status.failing
    assert 'data-testid="gpu-use-note"' in showback.content.decode()


def test_old_readings_are_shown_as_stale_and_not_counted_as_idle(world: dict, read_once: dict) -> None:
    JobGpuUse.objects.update(read_at=timezone.now() - timedelta(hours=1))
    GpuUseRead.objects.update(attempted_at=timezone.now() - timedelta(hours=1))
    idle = page(world, "outsider", f"/jobs/{world['jobs']['idle'].uid}/")
    assert 'data-testid="gpu-use-stale"' in idle and "gpu-use-idle" not in idle
    assert "the worker has not read it since" in idle
    beta = client_for(world, "outsider").get("/showback/").context["gpu_use"].teams
    rows = [(r.name, r.idle_gpus, r.measured_gpus, str(r.unmeasured_gpus)) for r in beta]
    assert rows == [("Beta", 0, 0, "1")]


def test_off_without_prometheus_url_pages_say_nothing(world: dict, settings: Any) -> None:
    settings.PROMETHEUS_URL = ""
    assert "GPU use" not in page(world, "member", f"/jobs/{world['jobs']['busy'].uid}/")
    showback = client_for(world, "admin").get("/showback/")
    assert "gpu_use" not in showback.context and "gpu-use" not in showback.content.decode()
    JobGpuUse(job=world["jobs"]["busy"], read_at=timezone.now(), window_seconds=600).save()  # from before
    assert client_for(world, "member").get("/api/v1/gpu-use/").json()["results"] == []
    assert tasks.read_gpu_use() == "off" and not GpuUseRead.objects.exists()


def test_before_the_first_read_pages_say_so(world: dict, settings: Any) -> None:
    settings.PROMETHEUS_URL = _closed_url()
    busy = page(world, "member", f"/jobs/{world['jobs']['busy'].uid}/")
    assert "GPU use has not been read yet" in busy and "No GPU use read for this job yet" in busy


@pytest.mark.parametrize(("url", "scheduled"), [("", False), ("http://prometheus:9090", True)])
def test_beat_reads_gpu_use_only_with_prometheus_url(url: str, scheduled: bool) -> None:
    """Settings as a deployment loads them: the read is on beat's schedule exactly when the URL is set."""
    env = {k: v for k, v in os.environ.items() if k not in {"PROMETHEUS_URL", "GPU_USE_READ_SECONDS"}}
    env |= {"PROMETHEUS_URL": url, "GPU_USE_READ_SECONDS": "30", "DEBUG": "1"}
    code = "import json; from kai_portal import settings as s; print(json.dumps(s.CELERY_BEAT_SCHEDULE))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    entry = json.loads(out.stdout.strip().splitlines()[-1]).get("read-gpu-use")
    if scheduled:
        assert entry == {"task": "kai_portal.monitoring.tasks.read_gpu_use", "schedule": 30.0,
                         "options": {"queue": "default", "expires": 30.0}}  # fmt: skip
    else:
        assert entry is None
