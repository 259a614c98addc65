"""Role x endpoint x method: the same rules as the pages (style §5).

Not yours: 404. Yours but not yours to change: 403. Not signed in: 401.
Referring to a queue or team you cannot use in a request body: 400.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.portal.web.api_world import PERSONAS, World

QUEUE_YAML = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: imported}
spec:
  parentQueue: research
  resources:
    gpu: {quota: 0, limit: -1, overQuotaWeight: 1}
"""

MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: from-manifest
  labels: {kai.scheduler/queue: ml-train}
spec:
  containers:
    - name: main
      image: busybox
      resources: {limits: {nvidia.com/gpu: 1}}
"""

Url = Callable[[World], str]


def _o(name: str, attr: str) -> Callable[[World], Any]:
    return lambda w: getattr(w.objects[name], attr)


# (id, method, url(world), body or None, content type, {persona: status}); anon is always 401.
ALL_200 = {"admin": 200, "team_admin": 200, "member": 200, "other": 200}
ML_ONLY = {"admin": 200, "team_admin": 200, "member": 200, "other": 404}
CASES: list[tuple[str, str, Url, Any, str, dict[str, int]]] = [
    ("me", "get", lambda w: "/api/v1/me/", None, "json", ALL_200),
    ("tokens-list", "get", lambda w: "/api/v1/tokens/", None, "json", ALL_200),
    ("tokens-create", "post", lambda w: "/api/v1/tokens/", {"name": "ci"}, "json",
     {"admin": 201, "team_admin": 201, "member": 201, "other": 201}),
    ("teams-list", "get", lambda w: "/api/v1/teams/", None, "json", ALL_200),
    ("team-get", "get", lambda w: "/api/v1/teams/ml/", None, "json", ML_ONLY),
    ("team-patch", "patch", lambda w: "/api/v1/teams/ml/", {"description": "x"}, "json",
     {"admin": 200, "team_admin": 200, "member": 403, "other": 404}),
    ("team-create", "post", lambda w: "/api/v1/teams/", {"slug": "new", "name": "New"}, "json",
     {"admin": 201, "team_admin": 403, "member": 403, "other": 403}),
    ("team-delete", "delete", lambda w: "/api/v1/teams/ml/", None, "json",
     {"admin": 204, "team_admin": 403, "member": 403, "other": 404}),
    ("memberships-list", "get", lambda w: "/api/v1/memberships/", None, "json", ALL_200),
    ("membership-add", "post", lambda w: "/api/v1/memberships/", {"team": "ml", "user": "loner"}, "json",
     {"admin": 201, "team_admin": 201, "member": 403, "other": 400}),
    ("queues-list", "get", lambda w: "/api/v1/queues/", None, "json", ALL_200),
    ("queue-get", "get", lambda w: "/api/v1/queues/ml-train/", None, "json", ML_ONLY),
    ("queue-get-department", "get", lambda w: "/api/v1/queues/research/", None, "json", ALL_200),
    ("queue-patch", "patch", lambda w: "/api/v1/queues/ml-train/", {"gpu_quota": 3}, "json",
     {"admin": 200, "team_admin": 403, "member": 403, "other": 404}),
    ("queue-create", "post", lambda w: "/api/v1/queues/", {"name": "new-q", "parent": "research"}, "json",
     {"admin": 201, "team_admin": 403, "member": 403, "other": 403}),
    ("queue-delete", "delete", lambda w: "/api/v1/queues/ml-spare/", None, "json",
     {"admin": 204, "team_admin": 403, "member": 403, "other": 404}),
    ("queue-delete-with-jobs", "delete", lambda w: "/api/v1/queues/cv-train/", None, "json",
     {"admin": 409, "team_admin": 404, "member": 404, "other": 403}),
    ("queues-export", "get", lambda w: "/api/v1/queues/export/", None, "json", ALL_200),
    ("queues-import", "post", lambda w: "/api/v1/queues/import/", QUEUE_YAML, "application/yaml",
     {"admin": 200, "team_admin": 403, "member": 403, "other": 403}),
    ("queue-usage", "get", lambda w: "/api/v1/queues/ml-train/usage/", None, "json", ML_ONLY),
    ("jobs-list", "get", lambda w: "/api/v1/jobs/", None, "json", ALL_200),
    ("job-get", "get", lambda w: f"/api/v1/jobs/{w.objects['ml_job'].uid}/", None, "json", ML_ONLY),
    ("job-submit", "post", lambda w: "/api/v1/jobs/", {"name": "x", "queue": "ml-train", "gpu_count": 1},
     "json", {"admin": 201, "team_admin": 201, "member": 201, "other": 400}),
    ("job-submit-department", "post", lambda w: "/api/v1/jobs/", {"name": "x", "queue": "research"},
     "json", {"admin": 400, "team_admin": 400, "member": 400, "other": 400}),
    ("job-cancel-teammates", "post", lambda w: f"/api/v1/jobs/{w.objects['ml_lead_job'].uid}/cancel/", None,
     "json", {"admin": 200, "team_admin": 200, "member": 403, "other": 404}),
    ("job-cancel-own", "post", lambda w: f"/api/v1/jobs/{w.objects['ml_job'].uid}/cancel/", None,
     "json", {"admin": 200, "team_admin": 200, "member": 200, "other": 404}),
    ("job-manifest", "post", lambda w: "/api/v1/jobs/manifest/", MANIFEST, "application/yaml",
     {"admin": 201, "team_admin": 201, "member": 201, "other": 400}),
    ("job-pods", "get", lambda w: f"/api/v1/jobs/{w.objects['ml_job'].uid}/pods/", None, "json", ML_ONLY),
    ("job-delete", "delete", lambda w: f"/api/v1/jobs/{w.objects['ml_job'].uid}/", None, "json",
     {"admin": 405, "team_admin": 405, "member": 405, "other": 405}),
    ("pods-list", "get", lambda w: "/api/v1/pods/", None, "json", ALL_200),
    ("pod-get", "get", lambda w: f"/api/v1/pods/{w.objects['ml_pod'].pk}/", None, "json", ML_ONLY),
    ("node-pools-list", "get", lambda w: "/api/v1/node-pools/", None, "json", ALL_200),
    ("nodes-list", "get", lambda w: "/api/v1/nodes/", None, "json", ALL_200),
    ("node-get", "get", lambda w: "/api/v1/nodes/node-1/", None, "json", ALL_200),
    ("node-create", "post", lambda w: "/api/v1/nodes/", {"name": "n"}, "json",
     {"admin": 405, "team_admin": 405, "member": 405, "other": 405}),
    ("gpus-list", "get", lambda w: "/api/v1/gpus/", None, "json", ALL_200),
    ("cycles-list", "get", lambda w: "/api/v1/cycles/", None, "json", ALL_200),
    ("cycle-get", "get", lambda w: f"/api/v1/cycles/{w.objects['cycle'].pk}/", None, "json", ALL_200),
    ("decisions-list", "get", lambda w: "/api/v1/decisions/", None, "json", ALL_200),
    ("decision-get", "get", lambda w: f"/api/v1/decisions/{w.objects['decision'].pk}/", None, "json",
     ML_ONLY),
    ("job-messages-list", "get", lambda w: "/api/v1/job-messages/", None, "json", ALL_200),
    ("audit-list", "get", lambda w: "/api/v1/audit/", None, "json",
     {"admin": 200, "team_admin": 403, "member": 403, "other": 403}),
]  # fmt: skip

MATRIX = [
    pytest.param(method, url, body, content_type, persona, expected.get(persona, 401), id=f"{case}-{persona}")
    for case, method, url, body, content_type, expected in CASES
    for persona in PERSONAS
]


@pytest.mark.parametrize(("method", "url", "body", "content_type", "persona", "expected"), MATRIX)
def test_permission_matrix(
    world: World, method: str, url: Url, body: Any, content_type: str, persona: str, expected: int
) -> None:
    client = world.client(persona)
    kwargs: dict[str, Any] = {}
    if body is not None:
        kwargs = (
            {"data": body, "format": "json"}
            if content_type == "json"
            else {"data": body, "content_type": content_type}
        )
    response = getattr(client, method)(url(world), **kwargs)
    assert response.status_code == expected, response.content[:500]
    if response.status_code != 204 and "export" not in response.request["PATH_INFO"]:
        assert response["Content-Type"].startswith("application/json")
