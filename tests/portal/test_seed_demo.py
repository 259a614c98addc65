from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.test import Client

from kai_portal.cluster.models import GpuDevice, Node, NodePool
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job

pytestmark = pytest.mark.django_db


def counts() -> dict[str, int]:
    return {m._meta.label: m.objects.count() for m in apps.get_models() if m._meta.app_label != "sessions"}


def test_seed_demo_is_idempotent() -> None:
    call_command("seed_demo", stdout=StringIO())
    first = counts()
    call_command("seed_demo", stdout=StringIO())
    assert counts() == first


def test_seed_demo_builds_a_cluster_tree_and_a_job_mix(django_user_model: object) -> None:
    call_command("seed_demo", stdout=StringIO())
    assert NodePool.objects.count() >= 3
    assert all(n.gpus.count() == 8 for n in Node.objects.all())
    assert GpuDevice.objects.filter(node__pool__name="inference", memory_mib=24 * 1024).exists()
    assert Queue.objects.filter(parent__isnull=True).count() >= 2
    leaves = Queue.objects.filter(children__isnull=True)
    assert all(q.team is not None for q in leaves)
    assert Job.objects.filter(gpu_fraction__isnull=False).exists()
    assert Job.objects.filter(gpu_memory_mib__isnull=False).exists()
    assert Job.objects.filter(min_member__gt=1).exists()
    assert Job.objects.filter(state="pending").exists()
    admin = django_user_model.objects.get(username="admin")  # type: ignore[attr-defined]
    assert admin.is_portal_admin and admin.check_password("admin")


def test_seed_demo_against_a_real_cluster_makes_no_nodes_or_jobs(settings: object) -> None:
    """In kubernetes mode the cluster's nodes are the truth and a job is real pods: demo nodes would be
    deleted by the first sync and demo jobs would have no pods, so the seed makes only people and queues."""
    settings.CLUSTER_BACKEND = "kubernetes"  # type: ignore[attr-defined]
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "nodes and jobs come from the cluster" in out.getvalue()
    assert not Node.objects.exists() and not Job.objects.exists()
    assert Queue.objects.filter(children__isnull=True, team__isnull=False).count() >= 3
    assert set(NodePool.objects.values_list("name", flat=True)) >= {"default", "h100", "inference"}


def test_seed_demo_prints_sign_in_details_that_work(client: Client) -> None:
    """`make run` prints this line; it once sent people to Django's /admin/, where team users
    cannot sign in. Every account it names signs in to the portal with the password it names."""
    out = StringIO()
    call_command("seed_demo", stdout=out)
    text = out.getvalue()
    assert "/accounts/login/" in text and "/admin/" not in text
    for username, password in (("admin", "admin"), ("vision-dev1", "demo"), ("vision-lead", "demo")):
        assert f"'{username}'" in text
        response = client.post("/accounts/login/", {"username": username, "password": password})
        assert response.status_code == 302 and client.session.get("_auth_user_id"), username
        client.post("/accounts/logout/")
