"""An Idempotency-Key sent again with another body is refused with 409 (issue 26), not answered
with the first job: the client means another submission, and would believe it was made."""

from __future__ import annotations

import json

from kai_portal.workloads.models import Job
from tests.portal.web.api_world import World

BODY = {"name": "keyed", "queue": "ml-train", "gpu_count": 1, "task_count": 2, "min_member": 2}
MANIFEST = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: keyed-m, labels: {kai.scheduler/queue: ml-train}}\n"
    "spec: {containers: [{name: a, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
)


def test_the_same_key_with_another_body_is_a_409_and_creates_nothing(world: World) -> None:
    client = world.client("member")
    first = client.post("/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-body")
    assert first.status_code == 201, first.content

    other = client.post(
        "/api/v1/jobs/",
        {**BODY, "name": "keyed-2", "gpu_count": 2},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-body",
    )

    assert other.status_code == 409, other.content
    detail = other.json()["detail"]
    assert "Idempotency-Key" in detail and "different" in detail and "keyed" in detail
    assert not other.has_header("Idempotent-Replayed")
    assert list(Job.objects.filter(name__startswith="keyed").values_list("name", "gpu_count")) == [
        ("keyed", 1)
    ]


def test_the_same_body_in_another_key_order_is_still_a_replay(world: World) -> None:
    client = world.client("member")
    first = client.post("/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-order")
    reordered = json.dumps(dict(reversed(list(BODY.items()))))
    again = client.post(
        "/api/v1/jobs/", reordered, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-order"
    )
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json()["uid"] == first.json()["uid"]


def test_a_manifest_replayed_with_another_manifest_is_a_409(world: World) -> None:
    client = world.client("member")
    first = client.post(
        "/api/v1/jobs/manifest/", MANIFEST, content_type="application/yaml", HTTP_IDEMPOTENCY_KEY="m"
    )
    assert first.status_code == 201, first.content
    same = client.post(
        "/api/v1/jobs/manifest/", MANIFEST, content_type="application/yaml", HTTP_IDEMPOTENCY_KEY="m"
    )
    assert same.status_code == 201 and same["Idempotent-Replayed"] == "true"

    changed = MANIFEST.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 2")
    other = client.post(
        "/api/v1/jobs/manifest/", changed, content_type="application/yaml", HTTP_IDEMPOTENCY_KEY="m"
    )

    assert other.status_code == 409, other.content
    assert "Idempotency-Key" in other.json()["detail"]
    assert list(Job.objects.filter(name="keyed-m").values_list("gpu_count", flat=True)) == [1]


def test_a_key_used_for_a_job_form_cannot_replay_a_manifest(world: World) -> None:
    client = world.client("member")
    assert client.post("/api/v1/jobs/", BODY, format="json", HTTP_IDEMPOTENCY_KEY="k-x").status_code == 201
    other = client.post(
        "/api/v1/jobs/manifest/", MANIFEST, content_type="application/yaml", HTTP_IDEMPOTENCY_KEY="k-x"
    )
    assert other.status_code == 409, other.content
    assert not Job.objects.filter(name="keyed-m").exists()
