from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.test import Client

from kai_portal.nodes.models import GpuDevice, Node, NodePool
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_passwords")]


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


@pytest.mark.parametrize(
    "unset",
    [("DEMO_ADMIN_PASSWORD",), ("DEMO_USER_PASSWORD",), ("DEMO_ADMIN_PASSWORD", "DEMO_USER_PASSWORD")],
)
def test_with_debug_off_seed_demo_refuses_default_passwords_and_creates_nothing(
    settings: object, monkeypatch: pytest.MonkeyPatch, unset: tuple[str, ...]
) -> None:
    """A portal seeded with DEBUG off is reachable by others: an admin/admin superuser there is
    anyone's (issue 26). Without the passwords it refuses, naming the variables, before creating anything."""
    settings.DEBUG = False  # type: ignore[attr-defined]
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    before = counts()
    with pytest.raises(CommandError) as refused:
        call_command("seed_demo", stdout=StringIO())
    for name in unset:
        assert name in str(refused.value)
    assert "DEBUG is off" in str(refused.value) and "Nothing was created" in str(refused.value)
    assert counts() == before


def test_with_debug_off_seed_demo_uses_the_passwords_it_is_given(
    settings: object, monkeypatch: pytest.MonkeyPatch, client: Client
) -> None:
    settings.DEBUG = False  # type: ignore[attr-defined]
    monkeypatch.setenv("DEMO_ADMIN_PASSWORD", "a-long-admin-secret")
    monkeypatch.setenv("DEMO_USER_PASSWORD", "a-long-member-secret")
    call_command("seed_demo", stdout=StringIO())
    for username, password in (("admin", "admin"), ("vision-dev1", "demo")):
        refused = client.post("/accounts/login/", {"username": username, "password": password})
        assert refused.status_code == 200 and not client.session.get("_auth_user_id"), username
    response = client.post("/accounts/login/", {"username": "admin", "password": "a-long-admin-secret"})
    assert response.status_code == 302 and client.session.get("_auth_user_id")
