"""Queues over the API: computed status, validation, optimistic concurrency (409), Queue YAML."""

from __future__ import annotations

import pytest
import yaml
from django.utils import timezone

from kai_portal.history.models import QueueStatus
from kai_portal.queues.models import Queue
from tests.portal import factories
from tests.portal.web.api_world import World


def test_queue_status_comes_from_the_latest_usage_sample_and_is_null_without_one(world: World) -> None:
    body = world.client("member").get("/api/v1/queues/ml-train/").json()
    assert body["status"]["gpu"]["fair_share"] == 9
    assert body["status"]["gpu"]["deserved"] == 8
    assert body["status"]["gpu"]["allocated"] == 2
    assert body["status"]["cpu"]["fair_share"] is None
    assert body["is_leaf"] is True and body["parent"] == "research" and body["team"] == "ml"
    research = world.client("member").get("/api/v1/queues/research/").json()
    assert research["children"] == ["cv-train", "ml-spare", "ml-train"]
    assert research["status"]["gpu"]["fair_share"] is None


def test_queue_status_prefers_the_status_row_written_by_the_cycle(world: World) -> None:
    QueueStatus.objects.create(
        queue=world.objects["ml_q"], resource="gpu", deserved=5, fair_share=6, allocated=1, requested=2,
        updated_at=timezone.now(),
    )  # fmt: skip
    body = world.client("member").get("/api/v1/queues/ml-train/").json()
    assert body["status"]["gpu"]["fair_share"] == 6


def test_member_sees_own_queues_and_their_departments_only(world: World) -> None:
    names = [q["name"] for q in world.client("member").get("/api/v1/queues/").json()["results"]]
    assert names == ["ml-spare", "ml-train", "research"]


def test_queue_filters_and_ordering(world: World) -> None:
    client = world.client("admin")
    leaves = client.get("/api/v1/queues/?leaf=true&ordering=-gpu_quota").json()["results"]
    assert [q["name"] for q in leaves] == ["ml-train", "cv-train", "ml-spare"]
    assert [q["name"] for q in client.get("/api/v1/queues/?team=cv").json()["results"]] == ["cv-train"]
    assert client.get("/api/v1/queues/?ordering=secret_field").status_code == 200  # ignored, not a 500


def test_invalid_quota_is_a_400_with_field_messages_and_nothing_changes(world: World) -> None:
    client = world.client("admin")
    response = client.patch("/api/v1/queues/ml-train/", {"gpu_quota": 4, "gpu_limit": 2}, format="json")
    assert response.status_code == 400
    assert "gpu_limit" in response.json() and "at least the quota" in response.json()["gpu_limit"][0]
    too_big = client.patch("/api/v1/queues/ml-train/", {"gpu_quota": 100}, format="json")
    assert too_big.status_code == 400 and "does not fit in parent" in too_big.json()["gpu_quota"][0]
    negative = client.post("/api/v1/queues/", {"name": "Bad Name", "cpu_quota": -5}, format="json")
    assert negative.status_code == 400 and {"name", "cpu_quota"} <= set(negative.json())
    assert Queue.objects.get(name="ml-train").gpu_quota == 8
    assert not Queue.objects.filter(name="Bad Name").exists()


def test_stale_if_match_is_a_409_and_the_current_etag_works(world: World) -> None:
    client = world.client("admin")
    read = client.get("/api/v1/queues/ml-train/")
    etag = read["ETag"]
    ok = client.patch("/api/v1/queues/ml-train/", {"gpu_quota": 6}, format="json", HTTP_IF_MATCH=etag)
    assert ok.status_code == 200 and ok["ETag"] != etag
    stale = client.patch("/api/v1/queues/ml-train/", {"gpu_quota": 5}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 409 and "changed since you read it" in stale.json()["detail"]
    assert Queue.objects.get(name="ml-train").gpu_quota == 6


def test_stale_updated_at_in_the_body_is_a_409(world: World) -> None:
    client = world.client("admin")
    read = client.get("/api/v1/queues/ml-train/").json()
    client.patch(
        "/api/v1/queues/ml-train/", {"priority": 120, "updated_at": read["updated_at"]}, format="json"
    )
    stale = client.patch(
        "/api/v1/queues/ml-train/", {"priority": 90, "updated_at": read["updated_at"]}, format="json"
    )
    assert stale.status_code == 409
    assert Queue.objects.get(name="ml-train").priority == 120
    bad = client.patch("/api/v1/queues/ml-train/", {"updated_at": "yesterday"}, format="json")
    assert bad.status_code == 400 and "updated_at" in bad.json()


def test_queue_changes_over_the_api_are_audited_with_the_token_owner(world: World) -> None:
    from kai_portal.audit.models import AuditEntry

    world.client("admin").patch("/api/v1/queues/ml-train/", {"gpu_quota": 7}, format="json")
    entry = AuditEntry.objects.filter(object_repr="ml-train", action="update").latest("at")
    assert entry.actor_name == "root" and entry.source == "api"


def test_queue_yaml_round_trip_over_the_api(world: World) -> None:
    client = world.client("admin")
    exported = client.get("/api/v1/queues/export/")
    assert exported["Content-Type"].startswith("application/yaml")
    docs = list(yaml.safe_load_all(exported.content))
    assert [d["metadata"]["name"] for d in docs][0] == "research"
    Queue.objects.filter(name="ml-spare").delete()
    imported = client.post("/api/v1/queues/import/", exported.content, content_type="application/yaml")
    assert imported.status_code == 200, imported.content
    assert imported.json()["created"] == ["ml-spare"]
    assert sorted(imported.json()["updated"]) == ["cv-train", "ml-train", "research"]
    # The portal keeps MiB and the YAML MB: the YAML is what survives the trip unchanged.
    assert client.get("/api/v1/queues/export/").content == exported.content


def test_member_export_holds_only_visible_queues(world: World) -> None:
    docs = list(yaml.safe_load_all(world.client("member").get("/api/v1/queues/export/").content))
    assert {d["metadata"]["name"] for d in docs} == {"research", "ml-train", "ml-spare"}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("apiVersion: v1\nkind: Queue\nmetadata: {name: x}\n", "apiVersion"),
        ("apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: x}\nspec: {parentQueue: nope}\n",
         "spec.parentQueue"),
        ("a: [\n", "(yaml)"),
    ],
)  # fmt: skip
def test_bad_queue_yaml_is_a_400_naming_the_key_and_nothing_is_saved(
    world: World, text: str, key: str
) -> None:
    count = Queue.objects.count()
    response = world.client("admin").post("/api/v1/queues/import/", text, content_type="application/yaml")
    assert response.status_code == 400
    assert response.json()["key"] == key
    assert Queue.objects.count() == count


def test_usage_history_has_a_time_window(world: World) -> None:
    client = world.client("member")
    default = client.get("/api/v1/queues/ml-train/usage/").json()
    assert default["count"] == 2 and default["results"][0]["fair_share"] == 9
    since = (timezone.now() - timezone.timedelta(minutes=60)).isoformat()
    narrow = client.get("/api/v1/queues/ml-train/usage/", {"since": since, "resource": "gpu"}).json()
    assert narrow["count"] == 1
    assert client.get("/api/v1/queues/ml-train/usage/?since=notadate").status_code == 400


@pytest.mark.parametrize("rows", [1, 20])
def test_queue_list_query_count_does_not_grow_with_rows(
    db: None, rows: int, django_assert_max_num_queries
) -> None:
    world = World()
    from kai_portal.accounts import tokens
    from kai_portal.accounts.models import User

    admin = User.objects.create_superuser("root", password="x")
    world.secrets["admin"] = tokens.create_token(admin, "t")[1]
    top = factories.queue("top", gpu_quota=-1)
    for i in range(rows):
        factories.queue(f"q{i}", parent=top, team=factories.team(f"t{i}"), gpu_quota=-1)
    client = world.client("admin")
    with django_assert_max_num_queries(7):
        response = client.get("/api/v1/queues/")
    assert response.json()["count"] == rows + 1
