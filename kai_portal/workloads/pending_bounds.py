"""Bounds on pending work: how many pending tasks a member, a team and a queue may have (issue 26).

One member's backlog must not halt scheduling for everyone: 60 jobs of 10,000 tasks once made
every cycle run into Celery's hard time limit. The cycle itself is bounded in the backlog
(``scheduling/backlog.py``); these bounds keep the backlog itself, and the rows behind it, to
what an admin agreed to. Three bounds, each checked on every submission path (form, YAML, API,
CLI all end in ``submission.submit``) before anything is saved:

* per queue: ``Queue.max_pending_tasks``, else ``MAX_PENDING_TASKS_PER_QUEUE``;
* per team (its queues together, with the team-less queues below them): ``Team.max_pending_tasks``,
  else ``MAX_PENDING_TASKS_PER_TEAM``;
* per member within a team (their jobs in the team's queues): ``Team.max_pending_tasks_per_member``,
  else ``MAX_PENDING_TASKS_PER_MEMBER``; for queues without a team, the member's jobs in such queues
  against the default.

A pending task is a pending pod of an active job: what the cycle has to look at.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Count, Q

from kai_portal.queues.models import Queue
from kai_portal.teams.models import Team
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod

FIELD = "task_count"  # what the submitter changes to come within a bound


def check_pending_bounds(job: Job) -> None:
    """Refuse (``ValidationError`` on ``task_count``) a new job whose pending tasks would take its
    member, team or queue past a bound, naming the bound, the count now and the limit.

    Call inside the submission's transaction: the team's and the queue's rows are locked first, so
    two submissions to one team (or one queue) count one after the other, never both below a
    bound they cross together."""
    team_queues = _queues_by_team()
    team_id = next((t for t, ids in team_queues.items() if job.queue_id in ids), None)
    # Team before queue: two submissions never wait on each other crosswise.
    team = Team.objects.select_for_update(no_key=True).get(pk=team_id) if team_id is not None else None
    queue = Queue.objects.select_for_update(no_key=True).get(pk=job.queue_id)
    new = int(job.task_count)
    pending = Pod.objects.filter(state=PodState.PENDING, job__state__in=JobState.active())
    in_team = Q(job__queue_id__in=team_queues.get(team_id, set()))
    mine = in_team & Q(job__submitter=job.submitter) if job.submitter is not None else Q(pk__in=[])
    counts = pending.filter(Q(job__queue=queue) | in_team).aggregate(
        queue=Count("pk", filter=Q(job__queue=queue)),
        team=Count("pk", filter=in_team),
        member=Count("pk", filter=mine),
    )
    problems: list[str] = []
    queue_limit = queue.max_pending_tasks or settings.MAX_PENDING_TASKS_PER_QUEUE
    if counts["queue"] + new > queue_limit:
        problems.append(
            _message(f"queue '{queue.name}'", counts["queue"], new, queue_limit,
                     "the queue's bound" if queue.max_pending_tasks else "MAX_PENDING_TASKS_PER_QUEUE")
        )  # fmt: skip
    if team is not None:
        team_limit = team.max_pending_tasks or settings.MAX_PENDING_TASKS_PER_TEAM
        if counts["team"] + new > team_limit:
            problems.append(
                _message(f"team '{team.slug}'", counts["team"], new, team_limit,
                         "the team's bound" if team.max_pending_tasks else "MAX_PENDING_TASKS_PER_TEAM")
            )  # fmt: skip
    if job.submitter is not None:
        own = team.max_pending_tasks_per_member if team is not None else None
        member_limit = own or settings.MAX_PENDING_TASKS_PER_MEMBER
        where = f"in team '{team.slug}'" if team is not None else "in queues without a team"
        if counts["member"] + new > member_limit:
            problems.append(
                _message(f"member '{job.submitter.get_username()}' {where}", counts["member"], new,
                         member_limit,
                         "the team's per-member bound" if own else "MAX_PENDING_TASKS_PER_MEMBER")
            )  # fmt: skip
    if problems:
        raise ValidationError({FIELD: problems})


def _queues_by_team() -> dict[int | None, set[int]]:
    """Queue ids by the team that owns them: a queue's own team, else its nearest ancestor's
    (``pod_security.team_of``'s rule, here over the whole tree in one query); ``None`` holds
    the queues of no team."""
    tree = Queue.objects.values_list("pk", "parent_id", "team_id")
    rows = {pk: (parent, team) for pk, parent, team in tree}
    owners: dict[int | None, set[int]] = {}
    for pk in rows:
        node: int | None = pk
        while node is not None and rows[node][1] is None:
            node = rows[node][0]
        owners.setdefault(rows[node][1] if node is not None else None, set()).add(pk)
    return owners


def _message(who: str, now: int, new: int, limit: int, source: str) -> str:
    return (
        f"Too many pending tasks: {who} has {now:,} pending, and this job's {new:,} would make "
        f"{now + new:,}, over the bound of {limit:,} ({source}). Submit fewer tasks, wait for pending "
        "ones to start, cancel some, or ask a portal admin to raise the bound."
    )
