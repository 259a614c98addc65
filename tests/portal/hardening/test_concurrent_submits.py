"""Same-name job submits racing each other make one job (issue 26: 8 parallel POSTs made 3).

The name rule (a queue's pending and running jobs have distinct names: their pods are named after
the job) is checked in ``Job.clean``, and checked again by the database (a conditional unique
constraint), so two requests that both passed the check cannot both commit. Each request runs in
its own thread with its own PostgreSQL connection, released together by a barrier.
"""

from __future__ import annotations

import pytest

from kai_portal.workloads.models import Job, Pod
from tests.portal.concurrency import at_once
from tests.portal.web.api_world import World

pytestmark = pytest.mark.django_db(transaction=True)

NAME_RULE = "already has a pending or running job named 'samejob'"


@pytest.mark.parametrize("attempt", range(3))
def test_eight_concurrent_same_name_submits_make_one_job(world: World, attempt: int) -> None:
    token = world.secrets["member"]
    body = {"name": "samejob", "queue": "ml-train", "gpu_count": 0, "cpu_millicores": 100}

    def submit(i: int) -> tuple[int, str]:
        client = World(secrets={"member": token}).client("member")
        response = client.post("/api/v1/jobs/", body, format="json")
        return response.status_code, response.content.decode()

    answers = at_once(8, submit)

    codes = sorted(code for code, _ in answers)
    assert codes == [201] + [400] * 7, answers
    for code, text in answers:
        if code == 400:
            assert NAME_RULE in text and "choose another name" in text, text
    assert Job.objects.filter(name="samejob").count() == 1
    assert Pod.objects.filter(name="samejob-0").count() == 1


def test_eight_concurrent_same_name_manifests_make_one_job(world: World) -> None:
    token = world.secrets["member"]
    manifest = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: samejob, labels: {kai.scheduler/queue: ml-train}}\n"
        "spec: {containers: [{name: a, image: busybox}]}\n"
    )

    def submit(i: int) -> tuple[int, str]:
        client = World(secrets={"member": token}).client("member")
        response = client.post("/api/v1/jobs/manifest/", manifest, content_type="application/yaml")
        return response.status_code, response.content.decode()

    answers = at_once(8, submit)

    assert sorted(code for code, _ in answers) == [201] + [400] * 7, answers
    assert all(NAME_RULE in text for code, text in answers if code == 400), answers
    assert Job.objects.filter(name="samejob").count() == 1
