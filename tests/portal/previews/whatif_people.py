"""The what-if tests' personas (a fixture; conftest.py re-exports it)."""

from __future__ import annotations

from typing import Any

import pytest

from kai_portal.teams.models import Membership
from tests.portal import factories


@pytest.fixture
def people(db: None, django_user_model: Any) -> dict[str, Any]:
    """Teams a and b under one department; ``member`` is in team a only."""
    a_team, b_team = factories.team("team-a"), factories.team("team-b")
    users = {
        "admin": django_user_model.objects.create_superuser("root", "root@example.com", "pw"),
        "member": django_user_model.objects.create_user("alice", password="pw"),
        "other": django_user_model.objects.create_user("bob", password="pw"),
    }
    Membership(team=a_team, user=users["member"]).save()
    Membership(team=b_team, user=users["other"]).save()
    return {"users": users, "teams": {"a": a_team, "b": b_team}}
