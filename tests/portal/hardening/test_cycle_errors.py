"""A failed cycle's traceback (server paths) is shown to portal admins only (issue 14)."""

from __future__ import annotations

from django.utils import timezone

from kai_portal.history.api.serializers import HIDDEN_ERROR
from kai_portal.history.models import SchedulingCycle
from tests.portal.web.api_world import World

TRACEBACK = (
    'Traceback (most recent call last):\n  File "/srv/kai/kai_portal/x.py", line 3\nOverflowError: boom\n'
)


def test_cycle_tracebacks_are_for_portal_admins_only(world: World) -> None:
    now = timezone.now()
    failed = SchedulingCycle.objects.create(started_at=now, finished_at=now, status="failed", error=TRACEBACK)

    def error_seen_by(persona: str) -> str:
        response = world.client(persona).get(f"/api/v1/cycles/{failed.pk}/")
        assert response.status_code == 200, response.content
        return response.json()["error"]

    assert error_seen_by("admin") == TRACEBACK
    for persona in ("team_admin", "member", "other"):
        assert error_seen_by(persona) == HIDDEN_ERROR
        listed = world.client(persona).get("/api/v1/cycles/").json()["results"]
        assert "/srv/kai" not in str(listed)
