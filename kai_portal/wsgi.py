"""WSGI entry point (gunicorn kai_portal.wsgi)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings")
application = get_wsgi_application()
