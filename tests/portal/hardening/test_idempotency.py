"""``Idempotency-Key`` on job submission: a retry returns the first job, never a duplicate (issue 14)."""

from __future__ import annotations

import io
import threading
import uuid
from pathlib import Path

import pytest
from django.db import connection

from kai_portal.cli import client as cli_client
from kai_portal.cli.main import main
from kai_portal.workloads.models import Job, Pod
from tests.portal.web.api_world import World, build_world

BODY = {"name": "retry-me", "queue": "ml-train", "gpu_count": 1, "task_count": 2, "min_member": 2}


def test_a_retry_with_the_same_key_returns_the_first_job(world: World) -> None:
    client = world.client("member")
    first = client.post("/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post("/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert first.status_code == 201 and again.status_code == 201, again.content
    assert again.json()["uid"] == first.json()["uid"] and again["Idempotent-Replayed"] == "true"
    assert Job.objects.filter(name="retry-me").count() == 1
    assert Pod.objects.filter(job__name="retry-me").count() == 2
    # Another key, or no key, is another submission; the same key from another user too.
    # (Each under its own name: a queue refuses a second live job of the same name.)
    other = {**BODY, "name": "retry-me-2"}
    assert client.post("/api/v1/jobs/", other, format="json", HTTP_IDEMPOTENCY_KEY="k-2").status_code == 201
    assert client.post("/api/v1/jobs/", {**BODY, "name": "retry-me-3"}, format="json").status_code == 201
    lead_body = {**BODY, "name": "retry-me-4"}
    lead = world.client("team_admin").post(
        "/api/v1/jobs/", lead_body, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert lead.status_code == 201 and lead.json()["uid"] != first.json()["uid"]
    assert Job.objects.filter(name__startswith="retry-me").count() == 4


def test_manifest_submission_honours_the_key(world: World) -> None:
    manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: m1, labels: {kai.scheduler/queue: ml-train}}\n"
    manifest += "spec: {containers: [{name: a}]}\n"
    client = world.client("member")
    codes = [
        client.post("/api/v1/jobs/manifest/", manifest, content_type="application/yaml",
                    HTTP_IDEMPOTENCY_KEY="m-1")
        for _ in range(3)
    ]  # fmt: skip
    assert {r.status_code for r in codes} == {201} and len({r.json()["uid"] for r in codes}) == 1
    assert Job.objects.filter(name="m1").count() == 1


def test_an_overlong_key_is_a_400(world: World) -> None:
    response = world.client("member").post(
        "/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k" * 300
    )
    assert response.status_code == 400 and "Idempotency-Key" in response.json()
    assert not Job.objects.filter(name="retry-me").exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_key_create_one_job() -> None:
    world = build_world()
    token = world.secrets["member"]
    barrier = threading.Barrier(5)
    uids: list[str] = []

    def post() -> None:
        try:
            barrier.wait()
            client = World(secrets={"member": token}).client("member")
            response = client.post("/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="race")
            assert response.status_code == 201, response.content
            uids.append(response.json()["uid"])
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(uids) == 5 and len(set(uids)) == 1
    assert Job.objects.filter(name="retry-me").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_cli_retries_a_lost_answer_with_the_same_key(live_server, tmp_path: Path, monkeypatch) -> None:
    world = build_world()
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: cli-retry, labels: {kai.scheduler/queue: ml-train}}\n"
        "spec: {containers: [{name: a}]}\n"
    )
    real_request = cli_client.Client.request
    sent_keys: list[str] = []

    def lose_first_answer(self, method, path, **kwargs):
        answer = real_request(self, method, path, **kwargs)  # the server saves the job...
        if method == "POST":
            sent_keys.append(kwargs["headers"]["Idempotency-Key"])
            if len(sent_keys) == 1:  # ...and the client never sees the answer
                raise cli_client.ApiError(0, "connection reset by peer")
        return answer

    monkeypatch.setattr(cli_client.Client, "request", lose_first_answer)
    monkeypatch.setattr(cli_client.time, "sleep", lambda s: None)
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", live_server.url, "--token", world.secrets["member"], "submit", "-f", str(path)],
                out=out, err=err)  # fmt: skip

    assert code == 0, err.getvalue()
    assert len(sent_keys) == 2 and sent_keys[0] == sent_keys[1] and uuid.UUID(sent_keys[0])
    job = Job.objects.get(name="cli-retry")
    assert job.uid.hex[:8] in out.getvalue().replace("-", "")
