"""With Redis unreachable the job list and submission still work, without the cache (issue 14)."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from kai_portal.workloads.models import Job
from tests.portal.web.api_world import World

NO_REDIS = {
    "default": {
        "BACKEND": "kai_portal.core.cache.DegradingRedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        "KEY_PREFIX": "kai-test",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 2},
    }
}


@pytest.fixture
def redis_down() -> object:
    with override_settings(CACHES=NO_REDIS):
        yield


def test_api_lists_and_accepts_jobs_with_redis_down(world: World, redis_down: object) -> None:
    client = world.client("member")
    listed = client.get("/api/v1/jobs/")
    assert listed.status_code == 200, listed.content
    assert {j["name"] for j in listed.json()["results"]} >= {"ml-by-member", "ml-by-lead"}
    submitted = client.post("/api/v1/jobs/", {"name": "no-redis", "queue": "ml-train", "gpu_count": 1},
                            format="json")  # fmt: skip
    assert submitted.status_code == 201, submitted.content
    assert Job.objects.filter(name="no-redis").count() == 1
    detail = client.get(f"/api/v1/jobs/{submitted.json()['uid']}/")
    assert detail.status_code == 200
    # Token checks (their failure throttle lives in the cache) still answer.
    assert World(secrets={"x": "wrong"}).client("x").get("/api/v1/jobs/").status_code == 401


def test_pages_list_and_accept_jobs_with_redis_down(world: World, redis_down: object) -> None:
    client = Client()
    client.force_login(world.users["member"])
    page = client.get("/jobs/")
    assert page.status_code == 200 and "ml-by-member" in page.content.decode()
    form = {"name": "no-redis-form", "queue": world.objects["ml_q"].pk, "task_count": "1", "min_member": "1",
            "gpu_mode": "whole", "gpu_count": "1", "cpu_cores": "1", "memory_mib": "0",
            "priority_class": "train", "gpu_fraction_devices": "1", "run_time": "10m"}  # fmt: skip
    response = client.post("/jobs/submit/", form)
    assert response.status_code == 302, response.context and response.context["form"].errors
    job = Job.objects.get(name="no-redis-form")
    assert client.get(f"/jobs/{job.uid}/").status_code == 200
