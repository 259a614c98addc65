from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from kai_portal.accounts import tokens
from kai_portal.accounts.models import ApiToken, User
from kai_portal.teams.models import Membership

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldGroups


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["team"]


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    inlines = [MembershipInline]
    list_display = ["username", "email", "first_name", "last_name", "is_superuser", "is_active"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created here (the secret is shown once in a message) and revoked by an action."""

    list_display = ["prefix", "name", "user", "read_only", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["read_only", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "user__username"]
    list_select_related = ["user"]
    autocomplete_fields = ["user"]
    actions = ["revoke_selected"]

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> _FieldGroups:
        if obj is None:
            return ["user", "name", "read_only"]
        return ["user", "name", "prefix", "read_only", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return []
        return ["user", "prefix", "read_only", "created_at", "last_used_at", "revoked_at"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        token, secret = tokens.create_token(obj.user, obj.name, read_only=obj.read_only)
        obj.pk = token.pk
        obj.refresh_from_db()
        self.message_user(
            request,
            f"Token created. Copy it now, it will not be shown again: {secret}",
            level=messages.WARNING,
        )

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(tokens.revoke_token(token) for token in queryset)
        self.message_user(request, f"Revoked {revoked} token(s).")
