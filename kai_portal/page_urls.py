"""Browser pages, mounted at / by the root URLconf. Each app adds its own include here."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
