from __future__ import annotations

from django.apps import AppConfig


class PlanningConfig(AppConfig):
    """Capacity planner: a window of the portal's job history replayed through the engine's
    simulator with today's queue settings and with changed ones (or extra nodes), in the worker."""

    name = "kai_portal.planning"
    verbose_name = "Capacity planning"
