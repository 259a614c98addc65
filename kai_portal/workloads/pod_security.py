"""The pod policy applied to a submission: the team's level, and the refusal the user sees.

``submission.submit`` calls ``enforce`` first, so every path (the form, the YAML page, the API's
JSON and manifest endpoints, the CLI through the API, ``seed_demo``) passes it before anything is
saved, in simulated and kubernetes mode alike (a manifest refused on a cluster is refused on a
laptop). The rules themselves are ``pod_policy`` (pure functions over the pod spec).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError

from kai_portal.queues.models import Queue
from kai_portal.teams.models import Team
from kai_portal.workloads import pod_policy
from kai_portal.workloads.models import Job

if TYPE_CHECKING:
    from kai_portal.workloads.cluster_jobs import Manifest


class PodPolicyRefused(ValidationError):
    """The job's pods would break its team's pod security level. A ``ValidationError`` keyed by
    the manifest path of each field at fault (the API answers 400 with those paths)."""

    def __init__(self, violations: list[pod_policy.Violation], level: str, team: Team | None) -> None:
        self.violations, self.level, self.team = violations, level, team
        messages: dict[str, list[str]] = {}
        for violation in violations:
            messages.setdefault(violation.path, []).append(violation.rule)
        super().__init__(messages)


def team_of(queue: Queue | None) -> Team | None:
    """The team that owns a queue: its own, else the nearest ancestor's."""
    while queue is not None and queue.team_id is None:
        queue = queue.parent
    return queue.team if queue is not None else None


def level_of(queue: Queue | None) -> str:
    """The pod security level of a queue's jobs: its team's; baseline for a queue of no team."""
    team = team_of(queue)
    return team.pod_security if team is not None else pod_policy.BASELINE


def violations(job: Job, manifest: Manifest | None) -> list[pod_policy.Violation]:
    """What the job's pods would break at its team's level. A manifest's pod is the user's own
    spec; a form or API-fields job's pod is built by the portal (image, command, resources, and
    the restricted security context at that level), so only its tolerations are the user's."""
    level = level_of(job.queue)
    if manifest is not None:
        template = manifest.template
        return pod_policy.check(template.spec, template.annotations, level, manifest.path)
    return pod_policy.check({"tolerations": list(job.tolerations or [])}, {}, level)


def enforce(job: Job, manifest: Manifest | None = None) -> None:
    """Refuse (``PodPolicyRefused``) a job whose pods its team's level does not allow."""
    found = violations(job, manifest)
    if found:
        raise PodPolicyRefused(found, level_of(job.queue), team_of(job.queue))
