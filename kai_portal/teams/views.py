"""Team pages: members and queues; team admins and portal admins manage members."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from kai_portal.core.access import get_visible_or_404, get_writable_or_403
from kai_portal.teams.forms import MemberAddForm, MemberRoleForm
from kai_portal.teams.models import Membership, Team


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    teams = Team.objects.visible_to(request.user).prefetch_related("queues")
    manageable = set(Team.objects.manageable_by(request.user).values_list("pk", flat=True))
    return render(request, "teams/team_list.html", {"teams": teams, "manageable": manageable})


@login_required
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = get_visible_or_404(Team.objects.visible_to(request.user), slug=slug)
    can_manage = Team.objects.manageable_by(request.user).filter(pk=team.pk).exists()
    form = MemberAddForm(team=team)
    if request.method == "POST":
        if not can_manage:
            return HttpResponse(status=403)
        form = MemberAddForm(request.POST, team=team)
        if form.is_valid():
            Membership(team=team, user=form.cleaned_data["username"], role=form.cleaned_data["role"]).save()
            messages.success(request, f"{form.cleaned_data['username']} added to {team.name}.")
            return redirect("teams:team_detail", slug=team.slug)
    context = {
        "team": team,
        "memberships": team.memberships.select_related("user").order_by("user__username"),
        "queues": team.queues.order_by("name"),
        "can_manage": can_manage,
        "form": form,
        "roles": Membership.Role.choices,
    }
    return render(request, "teams/team_detail.html", context)


@login_required
@require_POST
def member_update(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    """Change a member's role, or remove them (``action=remove``)."""
    team = get_writable_or_403(
        Team.objects.visible_to(request.user), Team.objects.manageable_by(request.user), slug=slug
    )
    membership = get_object_or_404(Membership, pk=membership_id, team=team)
    if request.POST.get("action") == "remove":
        membership.delete()
        messages.success(request, f"{membership.user} removed from {team.name}.")
    else:
        form = MemberRoleForm(request.POST)
        if form.is_valid():
            membership.role = form.cleaned_data["role"]
            membership.save()
            messages.success(request, f"{membership.user} is now {membership.get_role_display().lower()}.")
    return redirect("teams:team_detail", slug=team.slug)
