from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from kai_portal.queues.kai_yaml import export_queues


class Command(BaseCommand):
    help = "Write every queue as KAI Queue YAML (parents before children)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        text = export_queues()
        if options["output"]:
            Path(options["output"]).write_text(text)
        else:
            self.stdout.write(text, ending="")
