"""Node pools as KAI scheduling shards in the portal (kai-semantics §1.6; KAI's
docs/operator/scheduling-shards.md): a queue belongs to one pool, its quota and fair share
apply there only, a job runs in its queue's pool, and the queue tree adds up per pool."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils import timezone

from kai_portal.accounts.models import User
from kai_portal.nodes.models import NodePool
from kai_portal.queues.kai_yaml import QueueYamlError, export_queues, import_queues
from kai_portal.queues.models import Queue
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.workloads.manifests import ManifestError, submit_manifest
from kai_portal.workloads.models import Job
from tests.portal import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_passwords")]


def test_a_child_queue_is_in_its_parents_pool_and_a_department_defaults_to_the_default_pool() -> None:
    h100 = NodePool.objects.create(name="h100")
    dept = factories.queue("dept-h100", node_pool=h100, gpu_quota=8)
    child = factories.queue("team-h100", parent=dept, gpu_quota=4)
    assert child.node_pool == h100
    assert factories.queue("dept").node_pool.name == "default"
    with pytest.raises(ValidationError) as raised:
        factories.queue("stray", parent=dept, node_pool=NodePool.default_pool())
    assert raised.value.message_dict["node_pool"] == [
        "A child queue is in its parent's node pool: 'dept-h100' is in 'h100'."
    ]


def test_a_queue_with_active_jobs_keeps_its_pool() -> None:
    factories.node("n1", gpus=8)
    queue = factories.queue("team")
    factories.job(queue, "train")
    queue.node_pool = NodePool.objects.create(name="h100")
    with pytest.raises(ValidationError) as raised:
        queue.save()
    assert "has pending or running jobs in its current node pool" in raised.value.message_dict["node_pool"][0]


def test_each_queue_gets_fair_share_only_from_its_own_pool() -> None:
    """Two departments in two pools: fair shares add up to each pool's capacity, never across."""
    factories.node("a1", pool="a", gpus=8)
    factories.node("b1", pool="b", gpus=4)
    pool_a, pool_b = NodePool.objects.get(name="a"), NodePool.objects.get(name="b")
    team_a = factories.queue("team-a", node_pool=pool_a, gpu_quota=2)
    team_b = factories.queue("team-b", node_pool=pool_b, gpu_quota=2)
    factories.job(team_a, "wide-a", task_count=12, min_member=0)
    factories.job(team_b, "wide-b", task_count=12, min_member=0)
    run_scheduling_cycle(now=timezone.now())

    from kai_portal.history.queue_status import latest_status

    status = latest_status([team_a, team_b])
    assert status[team_a.pk]["gpu"]["fair_share"] == 8 and status[team_a.pk]["gpu"]["allocated"] == 8
    assert status[team_b.pk]["gpu"]["fair_share"] == 4 and status[team_b.pk]["gpu"]["allocated"] == 4
    placed = {pod.node.pool.name for pod in Job.objects.get(name="wide-b").pods.exclude(node=None)}
    assert placed == {"b"}


def test_queue_tree_groups_by_pool_with_totals_within_each_pools_capacity(client: Any) -> None:
    call_command("seed_demo", stdout=StringIO())
    start = timezone.now()
    for i in range(2):
        run_scheduling_cycle(now=start + timedelta(seconds=5 * i))
    client.force_login(User.objects.get(username="admin"))
    response = client.get("/queues/")
    groups = {group.name: group for group in response.context["pools"]}
    assert set(groups) == {"default", "h100", "inference"}
    for name, group in groups.items():
        capacity = Decimal(group.capacity)
        assert Decimal(group.totals["fair_share"]) <= capacity, name
        assert Decimal(group.totals["allocated"]) <= capacity, name
        assert {row.queue.node_pool.name for row in group.rows} == {name}
    # The whole cluster: departments' fair shares add up to at most its 112 GPUs.
    assert sum(Decimal(g.totals["fair_share"]) for g in groups.values()) <= 112
    page = response.content.decode()
    assert 'data-pool="h100"' in page and "Node pool <strong>inference</strong>" in page


def test_submit_form_names_each_queues_pool_and_offers_no_pool_choice(client: Any) -> None:
    call_command("seed_demo", stdout=StringIO())
    client.force_login(User.objects.get(username="nlp-dev1"))
    page = client.get("/jobs/submit/").content.decode()
    assert "nlp-h100 (NLP Research) · pool h100" in page
    assert "Any pool" not in page and 'name="node_pool"' not in page


def test_job_page_shows_its_queues_pool(client: Any) -> None:
    call_command("seed_demo", stdout=StringIO())
    job = Job.objects.get(name="llm-pretrain")
    assert job.node_pool is not None and job.node_pool.name == "h100"
    client.force_login(User.objects.get(username="admin"))
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert "<dt>Node pool</dt><dd>h100" in page


def test_manifest_naming_another_pool_than_its_queues_is_refused(portal_admin: Any) -> None:
    factories.node("n1", pool="h100", gpus=8)
    factories.queue("team")
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "labels": {"kai.scheduler/queue": "team", "kai.scheduler/node-pool": "h100"},
        },
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]},
    }
    with pytest.raises(ManifestError) as raised:
        submit_manifest(manifest, portal_admin)
    assert raised.value.path == 'metadata.labels["kai.scheduler/node-pool"]'
    assert "Queue 'team' is in node pool 'default', and a job runs in its queue's pool" in str(raised.value)
    assert not Job.objects.exists()


def test_queue_yaml_carries_the_node_pool_label_both_ways() -> None:
    NodePool.objects.create(name="h100")
    text = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: dept, labels: {kai.scheduler/node-pool: h100}}
spec: {resources: {gpu: {quota: 8, limit: -1, overQuotaWeight: 1}}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team}
spec: {parentQueue: dept, resources: {gpu: {quota: 4, limit: -1, overQuotaWeight: 1}}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: other}
spec: {}
"""
    import_queues(text)
    pools = dict(Queue.objects.values_list("name", "node_pool__name"))
    assert pools == {"dept": "h100", "team": "h100", "other": "default"}
    docs = {d["metadata"]["name"]: d["metadata"] for d in yaml.safe_load_all(export_queues())}
    assert docs["dept"]["labels"] == {"kai.scheduler/node-pool": "h100"}
    assert docs["team"]["labels"] == {"kai.scheduler/node-pool": "h100"}
    assert "labels" not in docs["other"]  # the default pool is KAI's unlabelled shard


def test_queue_yaml_with_an_unknown_pool_names_the_document_and_the_pools() -> None:
    NodePool.objects.create(name="h100")
    text = (
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\n"
        "metadata: {name: q, labels: {kai.scheduler/node-pool: a100}}\n"
    )
    with pytest.raises(QueueYamlError) as raised:
        import_queues(text)
    assert str(raised.value) == (
        "document 1 (queue 'q'), line 3, metadata.labels.kai.scheduler/node-pool: "
        "node pool 'a100' does not exist (pools: h100)"
    )
    assert not Queue.objects.exists()


def test_api_creates_a_queue_in_a_pool_and_a_child_follows_it(portal_admin: Any) -> None:
    from rest_framework.test import APIClient

    NodePool.objects.create(name="h100")
    api = APIClient()
    api.force_authenticate(portal_admin)
    created = api.post(
        "/api/v1/queues/", {"name": "dept", "node_pool": "h100", "gpu_quota": 8}, format="json"
    )
    assert created.status_code == 201, created.content
    child = api.post("/api/v1/queues/", {"name": "team", "parent": "dept", "gpu_quota": 4}, format="json")
    assert child.status_code == 201 and child.json()["node_pool"] == "h100"
    stray = api.post(
        "/api/v1/queues/", {"name": "stray", "parent": "dept", "node_pool": "default"}, format="json"
    )
    assert stray.status_code == 400 and "node_pool" in stray.json()
