from __future__ import annotations

from django.contrib import admin

from kai_portal.teams.models import Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug", "description"]
    prepopulated_fields = {"slug": ["name"]}
    # Changed on the team's page or through the API, which also relabel the team's namespaces.
    readonly_fields = ["pod_security"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__name", "team__slug"]
    autocomplete_fields = ["user", "team"]
