from __future__ import annotations

from django.apps import AppConfig


class ClusterConfig(AppConfig):
    """Keeping the portal and the cluster in step: the sync, node operations and their admin.

    The label ``cluster`` stays with the node models (kai_portal/nodes/apps.py)."""

    name = "kai_portal.cluster"
    label = "cluster_ops"
    verbose_name = "Cluster operations"
