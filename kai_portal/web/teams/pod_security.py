"""A portal admin changes a team's pod security level (issue 26): one operation for the team's
page and the API, so the level and its namespaces' labels never disagree."""

from __future__ import annotations

from django.db import transaction

from kai_portal.teams.models import Team
from kai_portal.workloads.cluster_jobs import relabel_namespaces


def change_level(team: Team, level: str) -> bool:
    """Set the team's level (audited: ``Team`` is an audited model) and, in kubernetes mode, its
    namespaces' Pod Security labels. Returns whether anything changed. ``ClusterRefused`` when a
    namespace could not be relabelled: then the level stays as it was, in the row and in ``team``."""
    before = team.pod_security
    if before == level:
        return False
    try:
        with transaction.atomic():
            team.pod_security = level
            team.save()
            relabel_namespaces(team)
    except Exception:
        team.pod_security = before
        raise
    return True
