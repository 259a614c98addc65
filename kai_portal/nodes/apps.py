from __future__ import annotations

from django.apps import AppConfig


class NodesConfig(AppConfig):
    """The cluster's inventory: node pools, nodes, GPU devices and pool usage samples.

    Low in the layers (queues, jobs and the backends all point at pools and nodes), so apart
    from kai_portal/cluster (the sync and node operations, which sit above jobs). The models
    keep the label ``cluster`` they were born with, so their tables (``cluster_*``), migration
    history, content types and admin URLs are unchanged by the move."""

    name = "kai_portal.nodes"
    label = "cluster"
    verbose_name = "Cluster"
