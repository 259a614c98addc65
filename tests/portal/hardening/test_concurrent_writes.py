"""Concurrent API writes on real PostgreSQL connections keep the queue tree's rules (issue 14).

Each request runs in its own thread with its own database connection, released together
by a barrier, as gunicorn workers would run them.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from kai_portal.queues.models import Queue
from tests.portal import factories
from tests.portal.concurrency import at_once
from tests.portal.web.api_world import World

pytestmark = pytest.mark.django_db(transaction=True)




def test_eight_concurrent_child_creates_never_exceed_the_parents_quota(world: World) -> None:
    # research: 16 GPUs, children hold 8 + 0 + 4 = 12, so 4 are left.
    assert sum(q.gpu_quota for q in Queue.objects.filter(parent__name="research")) == 12
    token = world.secrets["admin"]

    def create(i: int) -> int:
        client = World(secrets={"admin": token}).client("admin")
        return client.post(
            "/api/v1/queues/", {"name": f"child-{i}", "parent": "research", "gpu_quota": 1}, format="json"
        ).status_code

    codes = at_once(8, create)

    assert sorted(codes) == [201] * 4 + [400] * 4, codes
    children = Queue.objects.filter(parent__name="research")
    assert sum(q.gpu_quota for q in children) == Decimal(16)


def test_two_sibling_patches_cannot_both_push_the_children_over(world: World) -> None:
    factories.queue("sib-a", parent=world.objects["ml_q"].parent, gpu_quota=0)
    factories.queue("sib-b", parent=world.objects["ml_q"].parent, gpu_quota=0)
    token = world.secrets["admin"]
    for attempt in range(10):
        Queue.objects.filter(name__in=["sib-a", "sib-b"]).update(gpu_quota=0)

        def patch(i: int) -> int:
            client = World(secrets={"admin": token}).client("admin")
            name = "sib-a" if i == 0 else "sib-b"
            return client.patch(f"/api/v1/queues/{name}/", {"gpu_quota": 3}, format="json").status_code

        codes = at_once(2, patch)

        assert sorted(codes) == [200, 400], (attempt, codes)
        total = sum(q.gpu_quota for q in Queue.objects.filter(parent__name="research"))
        assert total <= 16, (attempt, total)


def test_concurrent_creates_of_one_name_give_one_201_and_400s(world: World) -> None:
    token = world.secrets["admin"]

    def create(i: int) -> tuple[int, dict]:
        client = World(secrets={"admin": token}).client("admin")
        response = client.post("/api/v1/queues/", {"name": "same-name", "gpu_quota": i}, format="json")
        return response.status_code, response.json()

    results = at_once(6, create)

    codes = sorted(code for code, _ in results)
    assert codes == [201] + [400] * 5, results
    for code, body in results:
        if code == 400:
            assert "already exists" in " ".join(body["name"]), body
    assert Queue.objects.filter(name="same-name").count() == 1
