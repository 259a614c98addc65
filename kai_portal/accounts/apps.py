from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "kai_portal.accounts"
    verbose_name = "Accounts"
