"""The Celery app. Workers and beat start with ``celery -A kai_portal ...``."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings")

app = Celery("kai_portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
