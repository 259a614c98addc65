from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from kai_portal.core.actor import acting_as
from kai_portal.queues import cluster_writes
from kai_portal.queues.kai_yaml import QueueYamlError, import_queues


class Command(BaseCommand):
    help = "Create or update queues from KAI Queue YAML (multi-document); all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="YAML file, or - for standard input")
        parser.add_argument("--actor", help="username recorded in the audit log (default: system)")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as exc:
            raise CommandError(f"{name}: cannot read: {exc}") from None
        user = None
        if options["actor"]:
            user = get_user_model().objects.filter(username=options["actor"]).first()
            if user is None:
                raise CommandError(f"--actor: no user named '{options['actor']}'")
        try:
            # Kubernetes mode: the Queue objects are written too, in the same all-or-nothing.
            with transaction.atomic(), acting_as(user, "command:import_queues"):
                result = import_queues(text)
                cluster_writes.publish_imported(result.created + result.updated)
        except QueueYamlError as exc:
            raise CommandError(f"{name}: {exc} (nothing was imported)") from None
        except cluster_writes.QueueWriteRefused as exc:
            raise CommandError(f"{name}: {exc}") from None
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(f"{name}: {len(result.created)} queue(s) created, {len(result.updated)} updated")
