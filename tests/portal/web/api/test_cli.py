"""The ``kai`` CLI against a live server with a real token (no mocking)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kai_portal.cli.main import main
from kai_portal.workloads.models import Job
from tests.portal.web.api_world import World, build_world

MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: cli-pod
  labels: {kai.scheduler/queue: ml-train}
  annotations: {gpu-fraction: "0.25"}
spec:
  containers: [{name: main, image: busybox}]
"""


@pytest.fixture
def live_world(transactional_db: None) -> World:
    return build_world()


def kai(live_server, world: World, persona: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", live_server.url, "--token", world.secrets[persona], *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_submit_list_show_cancel_and_queues(live_server, live_world: World, tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(MANIFEST)
    code, out, _ = kai(live_server, live_world, "member", "submit", "-f", str(path))
    assert code == 0 and "job cli-pod submitted to queue ml-train" in out
    uid = str(Job.objects.get(name="cli-pod").uid)

    Job.objects.filter(uid=uid).update(message="Waiting for 0.25 GPU: queue ml-train is over its fair share.")
    code, out, _ = kai(live_server, live_world, "member", "jobs")
    assert code == 0
    assert "cli-pod" in out and "over its fair share" in out and "0.25x1" in out
    assert "ml-by-lead" not in out  # only mine by default
    code, out, _ = kai(live_server, live_world, "member", "jobs", "--all")
    assert "ml-by-lead" in out and "cv-job" not in out

    code, out, _ = kai(live_server, live_world, "member", "job", uid[:8])
    assert code == 0 and "cli-pod-0" in out

    code, out, _ = kai(live_server, live_world, "member", "queues")
    assert code == 0
    line = next(row for row in out.splitlines() if row.startswith("ml-train"))
    assert line.split()[:8] == ["ml-train", "research", "ml", "8", "unlimited", "1", "8", "9"]

    code, out, _ = kai(live_server, live_world, "member", "cancel", uid)
    assert code == 0 and "cancelled" in out
    code, _, err = kai(live_server, live_world, "member", "cancel", uid)
    assert code == 1 and "HTTP 409" in err


def test_errors_are_reported_with_the_manifest_path(live_server, live_world: World, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(MANIFEST.replace("ml-train", "cv-train"))
    code, _, err = kai(live_server, live_world, "member", "submit", "-f", str(path))
    assert code == 1 and 'metadata.labels["kai.scheduler/queue"]' in err and "HTTP 400" in err
    out, err_io = io.StringIO(), io.StringIO()
    assert main(["--url", live_server.url, "--token", "kai_wrong", "jobs"], out=out, err=err_io) == 1
    assert "HTTP 401" in err_io.getvalue()
