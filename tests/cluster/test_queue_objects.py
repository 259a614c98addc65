"""KAI's ``Queue`` objects as the source of truth in kubernetes mode (issue 16), on a real API server.

KAI Scheduler's queue tree is the cluster's ``scheduling.run.ai/v2`` Queue objects: an operator
creates, edits and deletes them with kubectl, and the scheduler follows. The portal must do the
same (read them within one scheduling cycle, in KAI's units: memory in MB, the node-pool label),
and what an admin edits in the portal must land in the object, with the object's
resourceVersion as the precondition so a change made with kubectl meanwhile is never overwritten.

The CRD is KAI's own (``deployments/kai-scheduler/crds/`` from KAI's repository, as a cluster
set up for KAI has it), ours only when the KAI mirror is absent. The scheduling cycle reads as
the worker's ServiceAccount (``kai-portal``), the portal's writes go out as the web pods'
account (``kai-portal-web``), both with exactly the RBAC in ``deploy/rbac/``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from django.test import Client
from django.utils import timezone
from kubernetes import config

from kai_portal.audit.models import AuditEntry
from kai_portal.cluster.backends.kubernetes import KubernetesBackend, QueueObjects
from kai_portal.queues import cluster_writes
from kai_portal.queues.forms import QueueForm
from kai_portal.queues.models import Queue
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.lock import LOCK_NAME
from kai_portal.workloads.choices import JobState
from kai_portal.workloads.models import Job
from tests.kai_examples import MIRROR, kai_file

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.django_db

KAI_CRD = "deployments/kai-scheduler/crds/scheduling.run.ai_queues.yaml"
OUR_CRD = (
    Path(__file__).resolve().parents[2]
    / "deploy"
    / "helm"
    / "kai-portal"
    / "crds"
    / ("scheduling.run.ai_queues.yaml")
)


@pytest.fixture(scope="session")
def queue_crd(cluster: Cluster) -> str:
    """KAI's Queue CRD installed (same field manager as the chart test, so either may re-apply)."""
    text, whose = (kai_file(KAI_CRD), "KAI's") if MIRROR.exists() else (OUR_CRD.read_text(), "ours")
    cluster.kubectl(
        "apply",
        "--server-side",
        "--field-manager=kai-portal-test",
        "--force-conflicts",
        "-f",
        "-",
        stdin=text,
    )
    cluster.kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/queues.scheduling.run.ai")
    return whose


@pytest.fixture
def portal(
    queue_crd: str,
    backend: KubernetesBackend,
    web_kubeconfig: Path,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[KubernetesBackend]:
    """Kubernetes mode: cycles through ``backend`` (the worker's account), the web's Queue
    writes through the web account; no cycle lock left over."""
    settings.CLUSTER_BACKEND = "kubernetes"
    web_api = config.new_client_from_config(config_file=str(web_kubeconfig))
    monkeypatch.setattr(cluster_writes, "_objects", QueueObjects(web_api))
    lock = redis.Redis.from_url(settings.REDIS_URL)
    lock.delete(LOCK_NAME)
    yield backend
    lock.delete(LOCK_NAME)
    lock.close()
    web_api.close()


@pytest.fixture
def names(cluster: Cluster) -> Iterator[dict[str, str]]:
    """Unique Queue names for this test (Queue objects are cluster-wide), deleted afterwards."""
    suffix = secrets.token_hex(3)
    made = {base: f"{base}-{suffix}" for base in ("research", "vision", "nlp")}
    yield made
    cluster.kubectl("delete", "queue", *made.values(), "--ignore-not-found", "--wait=false")


def cycle(backend: KubernetesBackend) -> None:
    done = run_scheduling_cycle(now=timezone.now(), backend=backend)
    assert done.status == "succeeded", done.error


def queue_yaml(
    name: str,
    *,
    parent: str | None = None,
    gpu: float = 0,
    cpu: int = 0,
    memory_mb: int = 0,
    pool: str | None = None,
    **spec: Any,
) -> str:
    resources = {
        "gpu": {"quota": gpu, "limit": -1, "overQuotaWeight": 1},
        "cpu": {"quota": cpu, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": memory_mb, "limit": -1, "overQuotaWeight": 1},
    }
    metadata: dict[str, Any] = {"name": name}
    if pool:
        metadata["labels"] = {"kai.scheduler/node-pool": pool}
    body = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": metadata,
        "spec": {"resources": resources, **({"parentQueue": parent} if parent else {}), **spec},
    }
    return yaml.safe_dump(body)


def get_queue(cluster: Cluster, name: str) -> dict[str, Any]:
    """What an operator sees with ``kubectl get queue NAME -o yaml``."""
    return yaml.safe_load(cluster.kubectl("get", "queue", name, "-o", "yaml"))  # type: ignore[no-any-return]


def admin_client(django_user_model: Any) -> Client:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    web = Client()
    web.force_login(admin)
    return web


def form_data(queue: Queue, **changes: Any) -> dict[str, Any]:
    """The edit form as the browser posts it: every field's current value, then the user's changes."""
    form = QueueForm(instance=queue)
    data = {name: ("" if form[name].value() is None else form[name].value()) for name in form.fields}
    return {**data, **changes}


# --- read ----------------------------------------------------------------------------------------


def test_kai_queue_applied_with_kubectl_appears_after_one_cycle_with_its_quotas_parent_and_pool(
    cluster: Cluster, portal: KubernetesBackend, names: dict[str, str]
) -> None:
    """KAI: a Queue object is a queue, its spec in KAI's units (GPU devices, CPU millicores,
    memory MB), its shard the ``kai.scheduler/node-pool`` label, a child in its parent's tree."""
    research, vision = names["research"], names["vision"]
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        stdin=queue_yaml(
            research,
            gpu=8,
            cpu=64_000,
            memory_mb=512_000,
            pool="training",
            displayName="Research",
            priority=120,
            reclaimMinRuntime="10m",
        )
        + "---\n"
        + queue_yaml(vision, parent=research, gpu=4.5, cpu=16_000, memory_mb=1000, pool="training"),
    )
    cycle(portal)

    parent = Queue.objects.select_related("node_pool").get(name=research)
    child = Queue.objects.select_related("parent", "node_pool").get(name=vision)
    assert (parent.display_name, parent.priority, parent.reclaim_min_runtime) == (
        "Research",
        120,
        timedelta(minutes=10),
    )
    assert (parent.gpu_quota, parent.cpu_quota, parent.memory_quota) == (8, 64_000, Decimal("488281.250"))
    assert (child.gpu_quota, child.gpu_limit, child.gpu_over_quota_weight) == (Decimal("4.5"), -1, 1)
    assert child.memory_quota == Decimal("953.674")  # 1000 MB = 953.674 MiB (NOTES: MB vs MiB)
    assert child.parent == parent and child.node_pool.name == parent.node_pool.name == "training"
    obj = get_queue(cluster, vision)
    assert (child.cluster_uid, child.cluster_resource_version) == (
        obj["metadata"]["uid"],
        obj["metadata"]["resourceVersion"],
    )
    created = AuditEntry.objects.get(object_repr=vision, action="create")
    assert created.actor is None and created.source == "queue-sync"  # the system, not a person

    # `kubectl edit` of a quota is reflected within one cycle, as an audited update.
    cluster.kubectl(
        "patch",
        "queue",
        vision,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"resources": {"gpu": {"quota": 3}}}}),
    )
    cycle(portal)
    child.refresh_from_db()
    assert child.gpu_quota == 3
    assert child.cluster_resource_version == get_queue(cluster, vision)["metadata"]["resourceVersion"]
    update = AuditEntry.objects.get(object_repr=vision, action="update")
    assert (update.before["gpu_quota"], update.after["gpu_quota"], update.source) == (
        "4.50",
        "3.00",
        "queue-sync",
    )
    # An unchanged object is not re-applied: no further audit entries.
    cycle(portal)
    assert AuditEntry.objects.filter(object_repr=vision).count() == 2


def test_kais_own_example_queues_are_read_unchanged(cluster: Cluster, portal: KubernetesBackend) -> None:
    """KAI's examples/time-based-fairshare queues, applied as KAI's docs say, against KAI's CRD."""
    text = kai_file("examples/time-based-fairshare/two-queue-oscillation/queues.yaml")
    documents = [d for d in yaml.safe_load_all(text) if d]
    made = [d["metadata"]["name"] for d in documents]
    existing = set(cluster.kubectl("get", "queues", "-o", "name").split())
    if any(f"queue.scheduling.run.ai/{name}" in existing for name in made):
        pytest.skip("the cluster already has queues of that name (not the test's to change)")
    cluster.kubectl("apply", "-f", "-", stdin=text)
    try:
        cycle(portal)
        rows = {q.name: q for q in Queue.objects.filter(name__in=made).select_related("parent")}
        assert set(rows) == set(made)
        for document in documents:
            row, spec = rows[document["metadata"]["name"]], document["spec"]
            assert row.display_name == spec.get("displayName", "")
            assert (row.parent.name if row.parent else None) == spec.get("parentQueue")
            for resource, values in spec["resources"].items():
                assert getattr(row, f"{resource}_quota") == values["quota"]
                assert getattr(row, f"{resource}_limit") == values["limit"]
                assert getattr(row, f"{resource}_over_quota_weight") == values["overQuotaWeight"]
    finally:
        cluster.kubectl("delete", "queue", *made, "--ignore-not-found", "--wait=false")


# --- write ---------------------------------------------------------------------------------------


def test_quota_edit_in_the_portal_form_shows_up_in_kubectl_get_queue(
    cluster: Cluster, portal: KubernetesBackend, names: dict[str, str], django_user_model: Any
) -> None:
    """KAI reads quotas from the Queue object only: the portal's edit must be written there."""
    research, vision = names["research"], names["vision"]
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        stdin=queue_yaml(research, gpu=8, memory_mb=4000)
        + "---\n"
        + queue_yaml(vision, parent=research, gpu=2),
    )
    cycle(portal)
    queue = Queue.objects.get(name=vision)
    web = admin_client(django_user_model)
    response = web.post(
        f"/queues/{vision}/edit/",
        form_data(queue, gpu_quota="6", memory_quota="1907.349", gpu_over_quota_weight="3"),
    )
    assert response.status_code == 302, response.content.decode()[:2000]

    obj = get_queue(cluster, vision)
    gpu, memory = obj["spec"]["resources"]["gpu"], obj["spec"]["resources"]["memory"]
    assert (gpu["quota"], gpu["overQuotaWeight"], obj["spec"]["parentQueue"]) == (6, 3, research)
    assert memory["quota"] == 2000  # MiB in the portal, MB in KAI's object
    queue.refresh_from_db()
    assert queue.cluster_resource_version == obj["metadata"]["resourceVersion"]
    # The next cycle sees its own write as applied: no sync entry on top of the admin's.
    cycle(portal)
    assert list(
        AuditEntry.objects.filter(object_repr=vision, action="update").values_list("source", flat=True)
    ) == ["web"]

    # The API path: PATCH writes the object too; a portal-created queue becomes an object.
    api = web.patch(
        f"/api/v1/queues/{vision}/", {"priority": 130, "gpu_limit": "7"}, content_type="application/json"
    )
    assert api.status_code == 200, api.content
    assert get_queue(cluster, vision)["spec"]["priority"] == 130
    assert api.json()["cluster_resource_version"] == get_queue(cluster, vision)["metadata"]["resourceVersion"]
    assert get_queue(cluster, vision)["spec"]["resources"]["gpu"]["limit"] == 7
    created = web.post(
        "/api/v1/queues/",
        {"name": names["nlp"], "parent": research, "gpu_quota": "1"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    nlp = get_queue(cluster, names["nlp"])
    assert nlp["spec"]["parentQueue"] == research and nlp["spec"]["resources"]["gpu"]["quota"] == 1
    assert Queue.objects.get(name=names["nlp"]).cluster_uid == nlp["metadata"]["uid"]

    # Deleting in the portal deletes the object.
    assert web.delete(f"/api/v1/queues/{names['nlp']}/").status_code == 204
    wait_until(
        lambda: names["nlp"] not in cluster.kubectl("get", "queues", "-o", "name"),
        "the Queue object to be deleted",
    )


def test_edit_of_a_queue_changed_with_kubectl_since_the_portal_read_it_is_refused_and_nothing_saved(
    cluster: Cluster, portal: KubernetesBackend, names: dict[str, str], django_user_model: Any
) -> None:
    """Optimistic concurrency on the object's resourceVersion, as every Kubernetes client does:
    the operator's kubectl change is never overwritten by an edit based on older values."""
    research = names["research"]
    cluster.kubectl("apply", "-f", "-", stdin=queue_yaml(research, gpu=8))
    cycle(portal)
    queue = Queue.objects.get(name=research)
    stored = queue.cluster_resource_version
    web = admin_client(django_user_model)
    page = web.get(f"/queues/{research}/edit/")  # the admin opens the form ...
    assert page.status_code == 200
    # ... an operator changes the object meanwhile, and no cycle has read it yet.
    cluster.kubectl(
        "patch",
        "queue",
        research,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"resources": {"gpu": {"quota": 10}}}}),
    )
    audit_before = AuditEntry.objects.count()

    stale = form_data(queue, gpu_quota="5")  # what the page the admin opened posts
    assert stale["seen_resource_version"] == stored
    response = web.post(f"/queues/{research}/edit/", stale)
    assert response.status_code == 409
    page_text = response.content.decode()
    assert (
        f"The Queue object &#x27;{research}&#x27; changed in the cluster since the portal read it"
        in page_text
    )
    assert (
        f"resourceVersion {stored}" in page_text
        and "reload" in page_text
        and "Nothing was saved" in page_text
    )
    api = web.patch(f"/api/v1/queues/{research}/", {"gpu_quota": "5"}, content_type="application/json")
    assert api.status_code == 409
    assert "changed in the cluster since the portal read it" in api.json()["detail"]

    queue.refresh_from_db()
    assert (queue.gpu_quota, queue.cluster_resource_version) == (8, stored)  # the row is as it was
    assert AuditEntry.objects.count() == audit_before  # the rolled-back edit left no entry
    assert get_queue(cluster, research)["spec"]["resources"]["gpu"]["quota"] == 10  # kubectl's value kept

    # A cycle copies kubectl's change into the row; the page the admin opened before it is
    # still refused (its hidden resourceVersion is the precondition, not the row's newer one).
    cycle(portal)
    queue.refresh_from_db()
    assert queue.gpu_quota == 10
    stale_page = web.post(f"/queues/{research}/edit/", stale)
    assert stale_page.status_code == 409 and "changed in the cluster" in stale_page.content.decode()
    assert get_queue(cluster, research)["spec"]["resources"]["gpu"]["quota"] == 10
    # After a reload the edit goes through on the new version.
    response = web.post(f"/queues/{research}/edit/", form_data(queue, gpu_quota="5"))
    assert response.status_code == 302
    assert get_queue(cluster, research)["spec"]["resources"]["gpu"]["quota"] == 5


# --- delete --------------------------------------------------------------------------------------


def test_queue_deleted_with_kubectl_disappears_unless_it_still_has_active_jobs(
    cluster: Cluster, portal: KubernetesBackend, names: dict[str, str]
) -> None:
    """KAI: deleting the Queue object removes the queue. The portal keeps one whose jobs still
    run (their rows need it) and says why on the queue, then removes it once they have ended."""
    research, vision, nlp = names["research"], names["vision"], names["nlp"]
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        stdin="---\n".join(
            [
                queue_yaml(research, gpu=8),
                queue_yaml(vision, parent=research, gpu=2),
                queue_yaml(nlp, parent=research, gpu=2),
            ]
        ),
    )
    cycle(portal)
    # A job the sync found in the cluster (kubernetes mode: a portal submission would need a team
    # namespace and an image); only its row and state matter here.
    job = Job(queue=Queue.objects.get(name=nlp), name="found", namespace="ns", cluster_key="ns/Pod/found",
              gpu_count=1, priority=50, state=JobState.PENDING)  # fmt: skip
    job.save(validate=False)

    cluster.kubectl("delete", "queue", vision, nlp)
    cycle(portal)
    assert not Queue.objects.filter(name=vision).exists()
    deleted = AuditEntry.objects.get(object_repr=vision, action="delete")
    assert deleted.actor is None and deleted.source == "queue-sync"
    kept = Queue.objects.get(name=nlp)
    assert (
        "deleted in the cluster" in kept.cluster_message
        and "1 pending or running job" in kept.cluster_message
    )
    # The parent's object is still there, so the parent stays as it is.
    assert Queue.objects.get(name=research).cluster_message == ""

    # An ended job's row still names the queue (its history): kept, and said so.
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    cycle(portal)
    kept.refresh_from_db()
    assert "history of 1 finished job" in kept.cluster_message
    # Once that history is gone (pruned or deleted), the next cycle removes the queue.
    job.delete()
    cycle(portal)
    assert not Queue.objects.filter(name=nlp).exists()
    assert AuditEntry.objects.get(object_repr=nlp, action="delete").source == "queue-sync"


def test_queue_yaml_imported_in_the_portal_becomes_queue_objects(
    cluster: Cluster, portal: KubernetesBackend, names: dict[str, str], django_user_model: Any
) -> None:
    """The portal's KAI YAML import is an edit too: in kubernetes mode its queues are Queue
    objects afterwards, in KAI's units, and the next cycle finds nothing to change."""
    research, vision = names["research"], names["vision"]
    text = queue_yaml(research, gpu=8, memory_mb=2000) + "---\n" + queue_yaml(vision, parent=research, gpu=2)
    web = admin_client(django_user_model)
    response = web.post("/api/v1/queues/import/", text, content_type="application/yaml")
    assert response.status_code == 200, response.content
    assert sorted(response.json()["created"]) == sorted([research, vision])
    assert get_queue(cluster, research)["spec"]["resources"]["memory"]["quota"] == 2000
    assert get_queue(cluster, vision)["spec"]["parentQueue"] == research
    entries = AuditEntry.objects.count()
    cycle(portal)
    assert AuditEntry.objects.count() == entries
    assert Queue.objects.get(name=vision).cluster_uid == get_queue(cluster, vision)["metadata"]["uid"]
