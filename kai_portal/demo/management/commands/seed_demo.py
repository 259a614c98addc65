from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from kai_portal.core.actor import acting_as
from kai_portal.demo.seed import MissingDemoPassword, seed


class Command(BaseCommand):
    help = "Create demo node pools, nodes, teams, users, queues and jobs (idempotent; demo passwords)."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            with acting_as(None, "command:seed_demo"):
                simulated = seed()
        except MissingDemoPassword as exc:
            raise CommandError(str(exc)) from None
        if not simulated:
            self.stdout.write(
                "CLUSTER_BACKEND=kubernetes: made pools, teams, users and queues only; "
                "nodes and jobs come from the cluster."
            )
        # The portal's own sign-in, not Django's /admin/: the team users are not staff, and the
        # portal is where jobs are submitted and queues edited.
        self.stdout.write(
            "Demo data is in place. Sign in to the portal at /accounts/login/ as 'admin' (portal "
            "admin), password DEMO_ADMIN_PASSWORD (default admin with DEBUG=1), or as a team user such "
            "as 'vision-dev1' (member) or 'vision-lead' (team admin), password DEMO_USER_PASSWORD "
            "(default demo with DEBUG=1)."
        )
