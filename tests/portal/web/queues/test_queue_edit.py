"""Quota editing: saves through the model rules, shows their errors inline, lands in the audit log."""

from __future__ import annotations

from typing import Any

from kai_portal.audit.models import AuditEntry
from kai_portal.nodes.models import NodePool
from kai_portal.queues.forms import QueueForm
from kai_portal.queues.models import Queue
from tests.portal import factories
from tests.portal.web.rendered_form import rendered_form_data


def _data(queue: Queue, **changes: Any) -> dict[str, Any]:
    form = QueueForm(instance=queue)
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items()}
    data.update(changes)
    return data


def test_admin_edit_saves_and_writes_an_audit_entry(world: dict, client_for: Any) -> None:
    queue = world["queues"]["alpha"]
    response = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, gpu_quota="6"))
    assert response.status_code == 302
    queue.refresh_from_db()
    assert queue.gpu_quota == 6
    entry = AuditEntry.objects.filter(object_id=str(queue.pk), action="update").latest("at")
    assert entry.actor_name == "root" and entry.source == "web"
    assert entry.before["gpu_quota"] == "2.00" and entry.after["gpu_quota"] == "6.00"
    audit = client_for("admin").get(f"/audit/?queue={queue.pk}").content.decode()
    # Whole GPU counts read as whole numbers (issue 31), not as the stored "2.00" and "6.00".
    assert "gpu_quota" in audit and "<del>2</del> → <ins>6</ins>" in audit


def test_limit_below_quota_is_shown_on_the_field_and_nothing_is_saved(world: dict, client_for: Any) -> None:
    queue = world["queues"]["alpha"]
    before = AuditEntry.objects.count()
    response = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, gpu_limit="1"))
    assert response.status_code == 200
    assert "must be at least the quota" in response.context["form"].errors["gpu_limit"][0]
    assert "Nothing was saved" in response.content.decode()
    queue.refresh_from_db()
    assert queue.gpu_limit == -1 and AuditEntry.objects.count() == before


def test_child_quota_beyond_parent_is_refused_inline(world: dict, client_for: Any) -> None:
    queue = world["queues"]["alpha"]
    response = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, gpu_quota="7"))
    assert response.status_code == 200
    assert "does not fit in parent queue 'research'" in response.context["form"].errors["gpu_quota"][0]


def test_admin_moves_a_queue_to_another_parent(world: dict, client_for: Any) -> None:
    Queue(name="production", gpu_quota=-1).save()
    queue = world["queues"]["beta"]
    production = Queue.objects.get(name="production")
    response = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, parent=production.pk))
    assert response.status_code == 302
    queue.refresh_from_db()
    assert queue.parent == production


def test_admin_creates_a_queue(world: dict, client_for: Any) -> None:
    data = _data(Queue(), name="alpha-infer", parent=world["queues"]["research"].pk, gpu_quota="1")
    response = client_for("admin").post("/queues/new/", data)
    assert response.status_code == 302
    assert AuditEntry.objects.filter(action="create", object_repr="alpha-infer").exists()


def test_team_admin_cannot_post_quota_edits(world: dict, client_for: Any) -> None:
    queue = world["queues"]["alpha"]
    response = client_for("team_admin").post(f"/queues/{queue.name}/edit/", _data(queue, gpu_quota="6"))
    assert response.status_code == 403
    queue.refresh_from_db()
    assert queue.gpu_quota == 2


def test_a_queue_name_with_a_slash_is_refused_inline_not_a_500(world: dict, client_for: Any) -> None:
    queue = world["queues"]["alpha"]
    response = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, name="alpha/train"))
    assert response.status_code == 200
    assert "Kubernetes names" in response.context["form"].errors["name"][0]
    # The page still links to the stored queue, and nothing was renamed.
    assert f'href="/queues/{queue.name}/"' in response.content.decode()
    queue.refresh_from_db()
    assert queue.name == "alpha-train"


def _page_post(client: Any, path: str, **changes: str) -> Any:
    """Post the edit page's form as a browser does: the fields the page renders, some changed."""
    data = rendered_form_data(client.get(path).content.decode(), containing="gpu_quota")
    data.update(changes)
    return client.post(path, data)


def test_every_queue_saves_from_its_page_as_rendered_in_every_node_pool(world: dict, client_for: Any) -> None:
    """`make run`'s demo has a department tree per node pool. The edit page once left out the pool
    field, so saving any top-level queue outside the default pool failed ("Nothing was saved", no
    field marked) while tests that posted every form field passed."""
    factories.node("h100-node-1", pool="h100", gpus=8)
    h100 = NodePool.objects.get(name="h100")
    dept = factories.queue("research-h100", node_pool=h100, gpu_quota=8)
    factories.queue("alpha-h100", parent=dept, team=world["teams"]["alpha"], gpu_quota=4)
    client = client_for("admin")
    for queue in Queue.objects.all():
        response = _page_post(client, f"/queues/{queue.name}/edit/", gpu_over_quota_weight="2")
        assert response.status_code == 302, (queue.name, response.context["form"].errors)
        saved = Queue.objects.get(pk=queue.pk)
        assert saved.gpu_over_quota_weight == 2 and saved.node_pool_id == queue.node_pool_id, queue.name


def test_the_new_queue_page_creates_a_department_in_another_pool(world: dict, client_for: Any) -> None:
    factories.node("h100-node-1", pool="h100", gpus=8)
    h100 = NodePool.objects.get(name="h100")
    response = _page_post(
        client_for("admin"), "/queues/new/", name="inference", node_pool=str(h100.pk), gpu_quota="4"
    )
    assert response.status_code == 302, response.context["form"].errors
    assert Queue.objects.get(name="inference").node_pool == h100


def test_admin_sets_a_queues_bound_of_pending_tasks_audited(world: dict, client_for: Any) -> None:
    queue = world["queues"]["alpha"]
    response = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, max_pending_tasks="500"))
    assert response.status_code == 302
    queue.refresh_from_db()
    assert queue.max_pending_tasks == 500
    entry = AuditEntry.objects.filter(object_id=str(queue.pk), action="update").latest("at")
    assert entry.before["max_pending_tasks"] is None and entry.after["max_pending_tasks"] == 500
    page = client_for("admin").get(f"/queues/{queue.name}/").content.decode()
    assert "Pending tasks at most" in page and "500" in page
    refused = client_for("admin").post(f"/queues/{queue.name}/edit/", _data(queue, max_pending_tasks="0"))
    assert refused.status_code == 200 and "at least 1" in refused.content.decode()
