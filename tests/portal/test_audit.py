from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from kai_portal.audit.models import AuditEntry
from kai_portal.core.actor import acting_as
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Membership, Team
from tests.portal import factories

pytestmark = pytest.mark.django_db


def entries_for(obj: Any) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(object_id=str(obj.pk), content_type__model=obj._meta.model_name)
                .order_by("id"))  # fmt: skip


def test_queue_create_update_delete_record_actor_before_and_after(portal_admin: Any) -> None:
    with acting_as(portal_admin, "test"):
        queue = factories.queue("ml", gpu_quota=4)
        queue.gpu_quota = Decimal("6.5")
        queue.save()
        pk = queue.pk
        queue.delete()
    created, updated, deleted = AuditEntry.objects.filter(object_id=str(pk)).order_by("id")
    assert (created.action, created.before, created.after["gpu_quota"]) == ("create", None, "4.00")
    assert updated.action == "update"
    assert (updated.before["gpu_quota"], updated.after["gpu_quota"]) == ("4.00", "6.50")
    assert updated.changed_fields() == ["gpu_quota"]
    assert (deleted.action, deleted.before["name"], deleted.after) == ("delete", "ml", None)
    assert {e.actor for e in (created, updated, deleted)} == {portal_admin}
    assert created.actor_name == "root" and created.source == "test"


def test_save_without_changes_writes_no_entry() -> None:
    queue = factories.queue("ml")
    queue.save()
    assert len(entries_for(queue)) == 1


def test_rejected_change_writes_no_entry(leaf: Queue) -> None:
    before = AuditEntry.objects.count()
    leaf.gpu_limit = Decimal(1)
    with pytest.raises(ValidationError):
        leaf.save()
    assert AuditEntry.objects.count() == before


def test_changes_outside_a_request_are_attributed_to_the_system() -> None:
    team = factories.team("ml")
    (entry,) = entries_for(team)
    assert (entry.actor, entry.actor_name, entry.source) == (None, "", "system")


def test_team_deletion_records_cascaded_membership_deletes(django_user_model: Any) -> None:
    team = factories.team("ml")
    user = django_user_model.objects.create_user("ana")
    membership = Membership(team=team, user=user, role=Membership.Role.ADMIN)
    membership.save()
    membership_pk = membership.pk
    team.delete()
    deletes = AuditEntry.objects.filter(action="delete").order_by("id")
    assert {(e.content_type.model, e.object_id) for e in deletes} == {
        ("membership", str(membership_pk)),
        ("team", str(team.pk if team.pk else deletes.get(content_type__model="team").object_id)),
    }
    membership_entry = deletes.get(content_type__model="membership")
    assert membership_entry.before["role"] == "admin"


def test_admin_changes_are_recorded_with_the_signed_in_user(client: Any, portal_admin: Any) -> None:
    client.force_login(portal_admin)
    response = client.post(
        reverse("admin:teams_team_add"),
        {
            "slug": "vision", "name": "Vision", "description": "",
            "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
        },
    )  # fmt: skip
    assert response.status_code == 302, response.content
    team = Team.objects.get(slug="vision")
    (entry,) = entries_for(team)
    assert (entry.actor, entry.source, entry.after["name"]) == (portal_admin, "admin", "Vision")


def test_admin_rejects_an_invalid_quota_and_saves_nothing(client: Any, portal_admin: Any) -> None:
    client.force_login(portal_admin)
    data = {
        "name": "ml", "display_name": "", "priority": "100",
        "gpu_quota": "4", "gpu_limit": "3", "gpu_over_quota_weight": "1",
        "cpu_quota": "0", "cpu_limit": "-1", "cpu_over_quota_weight": "1",
        "memory_quota": "0", "memory_limit": "-1", "memory_over_quota_weight": "1",
        "children-TOTAL_FORMS": "0", "children-INITIAL_FORMS": "0",
    }  # fmt: skip
    response = client.post(reverse("admin:queues_queue_add"), data)
    assert response.status_code == 200
    assert (
        "Limit (3 GPUs) must be at least the quota (4 GPUs), or -1 for unlimited."
        in response.content.decode()
    )
    assert not Queue.objects.exists() and not AuditEntry.objects.exists()


def test_audit_log_is_read_only_in_the_admin(client: Any, portal_admin: Any) -> None:
    factories.team("ml")
    entry = AuditEntry.objects.get()
    client.force_login(portal_admin)
    assert client.get(reverse("admin:audit_auditentry_change", args=[entry.pk])).status_code == 200
    assert (
        client.post(reverse("admin:audit_auditentry_delete", args=[entry.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert AuditEntry.objects.count() == 1
