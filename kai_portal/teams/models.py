from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from kai_portal.core.validation import ValidatedModel
from kai_portal.teams.querysets import TeamQuerySet

if TYPE_CHECKING:
    from kai_portal.accounts.models import User


class Team(ValidatedModel):
    """A group of people who share queues and submit jobs together (a Run:ai project)."""

    class PodSecurity(models.TextChoices):
        """What the team's pods may ask for (``workloads/pod_policy.py``): the Kubernetes Pod
        Security Standard of that name, plus the portal's rules."""

        PRIVILEGED = "privileged", "Privileged (no Pod Security checks; any ServiceAccount)"
        BASELINE = "baseline", "Baseline (Kubernetes' default standard)"
        RESTRICTED = "restricted", "Restricted (non-root, no privilege escalation)"

    slug = models.SlugField(max_length=63, unique=True, help_text="Short identifier used in URLs and labels.")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    pod_security = models.CharField(
        "pod security level",
        max_length=16,
        choices=PodSecurity.choices,
        default=PodSecurity.BASELINE,
        help_text="What the team's pods may ask for; the label its namespaces carry "
        "(pod-security.kubernetes.io/enforce). Only portal admins change it.",
    )
    # Bounds on pending work (workloads/pending_bounds.py); empty = the deployment's default.
    max_pending_tasks = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1, "A bound of pending tasks is at least 1 (got %(show_value)s).")],
        help_text="Most pending tasks in this team's queues together; empty = the default "
        "(MAX_PENDING_TASKS_PER_TEAM). Set by portal admins.",
    )
    max_pending_tasks_per_member = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1, "A bound of pending tasks is at least 1 (got %(show_value)s).")],
        help_text="Most pending tasks one member may have in this team's queues; empty = the default "
        "(MAX_PENDING_TASKS_PER_MEMBER). Set by portal admins.",
    )
    members: models.ManyToManyField[User, Membership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams", blank=True
    )

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(ValidatedModel):
    """One person's place in one team, with a role."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Team admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__name", "user__username"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_one_per_team_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.get_role_display()})"
