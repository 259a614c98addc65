from __future__ import annotations

from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "kai_portal.cluster"
    verbose_name = "Cluster"
