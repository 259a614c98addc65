from __future__ import annotations

from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "kai_portal.teams"
    verbose_name = "Teams"
