"""``manage.py label_team_namespaces``: give every team's job namespaces their Pod Security label.

For namespaces the portal made before teams had a pod security level (issue 26): new ones are
labelled when created, and a level change relabels them; this labels the ones already there.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from kai_portal.teams.models import Team
from kai_portal.workloads import cluster_jobs


class Command(BaseCommand):
    help = (
        "Set pod-security.kubernetes.io/enforce on every team's job namespaces at the team's level "
        "(kubernetes mode with JOB_NAMESPACE_CREATE; a namespace not there yet is skipped)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not cluster_jobs.enabled() or not settings.JOB_NAMESPACE_CREATE:
            raise CommandError("Only the namespaces the portal makes are its to label: "
                               "set CLUSTER_BACKEND=kubernetes and JOB_NAMESPACE_CREATE=1.")  # fmt: skip
        for team in Team.objects.order_by("slug"):
            try:
                cluster_jobs.relabel_namespaces(team)
            except cluster_jobs.ClusterRefused as exc:
                raise CommandError(f"team {team.slug}: {exc.message}") from None
            namespaces = ", ".join(sorted(cluster_jobs.team_namespaces(team)))
            self.stdout.write(f"{team.slug}: {namespaces} at {team.pod_security}")
