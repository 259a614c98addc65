"""The Queue YAML import page: preview (nothing saved), apply (audit-logged as the admin), and
errors that name the document (from 1), the queue and the line."""

from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile

from kai_portal.audit.models import AuditEntry
from kai_portal.queues.models import Queue

DOCS = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 8, limit: -1, overQuotaWeight: 1}
    memory: {quota: 100000, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: vision}
spec:
  parentQueue: research
  priority: 100
  resources:
    gpu: {quota: 3, limit: -1, overQuotaWeight: 1}
    memory: {quota: 1000, limit: -1, overQuotaWeight: 1}
"""


def _post(client: Any, text: str, action: str = "preview") -> Any:
    return client.post("/queues/new/import/", {"text": text, "action": action})


def test_only_portal_admins_may_import(world: dict, client_for: Any) -> None:
    assert client_for("team_admin").get("/queues/new/import/").status_code == 403
    assert _post(client_for("member"), DOCS, "apply").status_code == 403
    assert not Queue.objects.filter(name="vision").exists()


def test_preview_lists_the_changes_and_saves_nothing(world: dict, client_for: Any) -> None:
    audit_before = AuditEntry.objects.count()
    response = _post(client_for("admin"), DOCS)
    assert response.status_code == 200
    assert response.context["error"] is None, str(response.context["error"])
    planned = {p.queue: p for p in response.context["planned"]}
    assert set(planned) == {"research", "vision"}
    assert planned["vision"].action == "create"
    research = {k: (b, a) for k, b, a in planned["research"].changes}
    assert planned["research"].action == "update" and research["memory_quota"][1] == "95367.432"
    assert not Queue.objects.filter(name="vision").exists()
    assert AuditEntry.objects.count() == audit_before
    assert 'data-testid="apply-import"' in response.content.decode()


def test_apply_imports_and_audit_logs_as_the_admin(world: dict, client_for: Any) -> None:
    response = _post(client_for("admin"), DOCS, "apply")
    assert response.status_code == 302 and response["Location"] == "/queues/"
    vision = Queue.objects.get(name="vision")
    assert (vision.parent.name, vision.gpu_quota) == ("research", 3)
    entry = AuditEntry.objects.filter(object_id=str(vision.pk), action="create").get()
    assert (entry.actor_name, entry.source) == ("root", "web")


def test_upload_a_file(world: dict, client_for: Any) -> None:
    upload = SimpleUploadedFile("queues.yaml", DOCS.encode(), content_type="application/yaml")
    response = client_for("admin").post("/queues/new/import/", {"upload": upload, "action": "preview"})
    assert {p.queue for p in response.context["planned"]} == {"research", "vision"}


def test_a_syntax_error_names_its_document_from_one_and_its_line(world: dict, client_for: Any) -> None:
    broken = DOCS.replace("  priority: 100\n", "  priority: [100\n")
    response = _post(client_for("admin"), broken)
    error = response.context["error"]
    assert error.index == 2 and error.line is not None and 14 <= error.line <= 16
    assert str(error).startswith("document 2 (queue 'vision'), line")
    assert "Nothing was imported" in response.content.decode()


def test_a_key_glued_to_a_flow_mapping_points_at_its_own_line(world: dict, client_for: Any) -> None:
    # The seed's mistake: "memory:{...}" without a space after the colon.
    for glued in ("    memory:{quota: 1000, limit: -1, overQuotaWeight: 1}\n", "    memory:{quota: 1000}\n"):
        text = DOCS.replace("    memory: {quota: 1000, limit: -1, overQuotaWeight: 1}\n", glued)
        error = _post(client_for("admin"), text).context["error"]
        assert (error.index, error.line) == (2, 17), str(error)
        assert "put a space after 'memory:'" in str(error) and error.queue == "vision"
    assert not Queue.objects.filter(name="vision").exists()


def test_a_bad_value_names_document_queue_key_and_line(world: dict, client_for: Any) -> None:
    response = _post(client_for("admin"), DOCS.replace("priority: 100", "priority: high"))
    error = response.context["error"]
    assert (
        str(error) == "document 2 (queue 'vision'), line 14, spec.priority: must be an integer (got 'high')"
    )
    html = response.content.decode()
    assert "&gt;  14 |   priority: high" in html  # the line, shown in place
    response = _post(client_for("admin"), DOCS.replace("quota: 3,", "quota: 9,"))
    error = response.context["error"]
    assert (error.index, error.queue, error.key, error.line) == (2, "vision", "spec.resources.gpu.quota", 16)
