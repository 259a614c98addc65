"""KAI Portal: the Django project (portal, REST API, scheduling loop)."""

from __future__ import annotations

from kai_portal.celery import app as celery_app

__all__ = ["celery_app"]
