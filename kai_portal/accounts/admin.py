from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from kai_portal.accounts.models import User
from kai_portal.teams.models import Membership


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["team"]


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    inlines = [MembershipInline]
    list_display = ["username", "email", "first_name", "last_name", "is_superuser", "is_active"]
