"""Team pages: members and queues; team admins and portal admins manage members."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from kai_portal.core.access import get_visible_or_404, get_writable_or_403
from kai_portal.teams.forms import MemberAddForm, MemberRoleForm, PodSecurityForm
from kai_portal.teams.models import Membership, Team
from kai_portal.web.teams.pod_security import change_level
from kai_portal.workloads.cluster_jobs import ClusterRefused


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
        "pod_security_form": PodSecurityForm(initial={"pod_security": team.pod_security}),
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


@login_required
@require_POST
def pod_security_update(request: HttpRequest, slug: str) -> HttpResponse:
    """A portal admin changes what the team's pods may ask for (audited; the namespaces' labels follow)."""
    team = get_visible_or_404(Team.objects.visible_to(request.user), slug=slug)
    if not request.user.is_portal_admin:  # type: ignore[union-attr]
        return HttpResponse("Only portal admins change a team's pod security level.", status=403)
    form = PodSecurityForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Choose one of: {', '.join(Team.PodSecurity.values)}.")
        return redirect("teams:team_detail", slug=team.slug)
    try:
        changed = change_level(team, form.cleaned_data["pod_security"])
    except ClusterRefused as exc:
        messages.error(request, exc.message)
    else:
        if changed:
            messages.success(
                request, f"{team.name}'s pods now run at pod security level {team.pod_security}."
            )
    return redirect("teams:team_detail", slug=team.slug)
