"""Deleting a queue from its page: the API's rule (no child queues, no jobs), confirmed first,
audited, and refused with the reason while nothing is deleted."""

from __future__ import annotations

from typing import Any

from kai_portal.audit.models import AuditEntry
from kai_portal.queues.models import Queue
from tests.portal import factories


def test_admin_confirms_and_deletes_an_empty_queue_which_is_audited(world: dict, client_for: Any) -> None:
    research = world["queues"]["alpha"].parent
    empty = factories.queue("spare", parent=research, gpu_quota=0)
    admin = client_for("admin")
    detail = admin.get(f"/queues/{empty.name}/").content.decode()
    assert f'href="/queues/{empty.name}/delete/"' in detail  # the page links to it
    confirm = admin.get(f"/queues/{empty.name}/delete/")
    assert confirm.status_code == 200 and "Delete queue spare" in confirm.content.decode()
    assert Queue.objects.filter(name="spare").exists()  # a GET deletes nothing

    response = admin.post(f"/queues/{empty.name}/delete/")
    assert response.status_code == 302 and response["Location"] == "/queues/"
    assert not Queue.objects.filter(name="spare").exists()
    entry = AuditEntry.objects.filter(object_id=str(empty.pk), action="delete").get()
    assert entry.actor_name == "root" and entry.source == "web"
    assert "Queue spare deleted." in admin.get("/queues/").content.decode()


def test_a_queue_with_jobs_or_children_is_kept_and_the_page_says_why(world: dict, client_for: Any) -> None:
    admin = client_for("admin")
    with_jobs = world["queues"]["alpha"]  # holds alpha-job
    response = admin.post(f"/queues/{with_jobs.name}/delete/")
    assert response.status_code == 409
    assert "has jobs; it is kept as their history" in response.content.decode()
    parent = with_jobs.parent
    response = admin.post(f"/queues/{parent.name}/delete/")
    assert response.status_code == 409
    assert "has child queues; delete or move them first" in response.content.decode()
    assert Queue.objects.filter(pk__in=[with_jobs.pk, parent.pk]).count() == 2
    assert not AuditEntry.objects.filter(action="delete").exists()


def test_members_cannot_delete_or_see_the_button(world: dict, client_for: Any) -> None:
    research = world["queues"]["alpha"].parent
    empty = factories.queue("spare", parent=research, team=world["teams"]["alpha"], gpu_quota=0)
    member = client_for("member")
    assert 'data-testid="delete-queue"' not in member.get(f"/queues/{empty.name}/").content.decode()
    assert member.post(f"/queues/{empty.name}/delete/").status_code == 403
    outsider = client_for("outsider")  # in team beta: alpha's queue is not theirs to see
    assert outsider.post(f"/queues/{world['queues']['alpha'].name}/delete/").status_code == 404
    assert Queue.objects.filter(name="spare").exists()


def test_a_cluster_that_refuses_the_object_delete_keeps_the_row(
    world: dict, client_for: Any, monkeypatch: Any
) -> None:
    # Kubernetes mode's Queue object delete runs in the row's transaction (the real API server's
    # answers are tested through the API in tests/cluster/test_queue_objects.py); injected here.
    from kai_portal.queues import cluster_writes

    def refuse(queue: Queue) -> None:
        raise cluster_writes.QueueWriteRefused("the API server could not be reached", conflict=False)

    monkeypatch.setattr(cluster_writes, "unpublish", refuse)
    empty = factories.queue("spare", parent=world["queues"]["alpha"].parent, gpu_quota=0)
    response = client_for("admin").post(f"/queues/{empty.name}/delete/")
    assert response.status_code == 503
    assert "the API server could not be reached" in response.content.decode()
    assert Queue.objects.filter(name="spare").exists()
    assert not AuditEntry.objects.filter(action="delete").exists()
