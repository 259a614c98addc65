from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "kai_portal.audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        from kai_portal.audit import recording

        recording.connect()
