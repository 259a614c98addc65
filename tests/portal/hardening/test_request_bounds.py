"""One set of request bounds (workloads/limits.py) for the API, the form and manifests.

Issue 14: a duration of 999999999 days was accepted and then crashed every cycle; a
negative one made a job "succeed" at once; cpu '1e999999999' and 999999999999h were 500s.
"""

from __future__ import annotations

import pytest
from django.test import Client

from kai_portal.workloads.models import Job
from tests.portal import factories
from tests.portal.web.api_world import World

BAD_API_FIELDS = [
    ({"duration": "999999999 00:00:00"}, "duration", "365"),
    ({"duration": "9999999999 00:00:00"}, "duration", "days"),  # past timedelta itself
    ({"duration": "-1 00:00:00"}, "duration", "greater than or equal"),
    ({"duration": "00:00:00"}, "duration", "greater than or equal"),
    ({"gpu_count": 5000}, "gpu_count", "1024"),
    ({"cpu_millicores": 2**31 - 1}, "cpu_millicores", "10000000"),
    ({"cpu_millicores": "1e999999999"}, "cpu_millicores", "valid integer"),
    ({"memory_mib": 2**40}, "memory_mib", "67108864"),
    ({"task_count": 20_000, "min_member": 1}, "task_count", "10000"),
    ({"task_count": 1, "min_member": 20_000}, "min_member", "10000"),
]


@pytest.mark.parametrize(("body", "field", "words"), BAD_API_FIELDS)
def test_api_refuses_out_of_bounds_requests_with_a_400_on_the_field(
    world: World, body: dict, field: str, words: str
) -> None:
    before = Job.objects.count()
    response = world.client("member").post(
        "/api/v1/jobs/", {"name": "x", "queue": "ml-train", "gpu_count": 1, **body}, format="json"
    )
    assert response.status_code == 400, response.content
    messages = " ".join(response.json()[field])
    assert words in messages, messages
    assert Job.objects.count() == before


def test_api_accepts_the_bounds_themselves(world: World) -> None:
    # A node as big as the bounds: submission also refuses a task larger than every node.
    factories.node("huge", cpu_millicores=10_000_000, memory_mib=64 * 2**20)
    response = world.client("member").post(
        "/api/v1/jobs/",
        {"name": "edge", "queue": "ml-train", "gpu_count": 1, "duration": "365 00:00:00",
         "cpu_millicores": 10_000_000, "memory_mib": 64 * 2**20},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    assert Job.objects.get(name="edge").duration.days == 365


FORM = {
    "name": "f",
    "task_count": "1",
    "min_member": "1",
    "gpu_mode": "whole",
    "gpu_count": "1",  # fmt: skip
    "cpu_cores": "1",
    "memory_mib": "0",
    "priority_class": "train",
    "gpu_fraction_devices": "1",
}


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"run_time": "999999999999h"}, "run_time", "too long"),
        ({"run_time": "9000h"}, "run_time", "at most 365 days"),
        ({"run_time": "-5m"}, "run_time", "negative"),
        ({"run_time": "0s"}, "run_time", "at least 1 second"),
        ({"cpu_cores": "99999"}, "cpu_cores", "10000"),
        ({"gpu_count": "5000"}, "gpu_count", "1024"),
    ],
)
def test_form_refuses_the_same_bounds(world: World, fields: dict, field: str, words: str) -> None:
    client = Client()
    client.force_login(world.users["member"])
    response = client.post("/jobs/submit/", {**FORM, "queue": world.objects["ml_q"].pk, **fields})
    assert response.status_code == 200
    errors = " ".join(response.context["form"].errors.get(field, []))
    assert words in errors, response.context["form"].errors
    assert not Job.objects.filter(name="f").exists()


MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: m
  labels: {{kai.scheduler/queue: ml-train}}
  annotations: {{kai.portal/duration: "{duration}"}}
spec:
  containers:
    - name: main
      resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}
"""


@pytest.mark.parametrize(
    ("duration", "cpu", "path", "words"),
    [
        ("999999999999h", "1", 'metadata.annotations["kai.portal/duration"]', "too long"),
        ("8761h", "1", 'metadata.annotations["kai.portal/duration"]', "at most 365 days"),
        ("0s", "1", 'metadata.annotations["kai.portal/duration"]', "at least 1 second"),
        ("1h", "1e999999999", 'spec.containers[0].resources.requests["cpu"]', "larger than any node"),
        ("1h", "20000", 'spec.containers[0].resources.requests["cpu"]', "at most 10000 cores"),
    ],
)
def test_manifests_refuse_the_same_bounds_naming_the_path(
    world: World, duration: str, cpu: str, path: str, words: str
) -> None:
    response = world.client("member").post(
        "/api/v1/jobs/manifest/", MANIFEST.format(duration=duration, cpu=cpu), content_type="application/yaml"
    )
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["path"] == path and words in body["message"], body
    assert not Job.objects.filter(name="m").exists()
