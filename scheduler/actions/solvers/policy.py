"""What an eviction action tells the shared victim search: one typed value per action.

KAI registers each action's rules as plugin callbacks on the session (``PrePredicate``,
``VictimFilter``, ``ScenarioValidator``, ...; ``framework/session_plugins.go``); here the action
hands its rules to :func:`scheduler.actions.solvers.loop.run_action` as one ``ActionPolicy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.actions.common.notes import Note
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.model import Job, Task
from scheduler.reasons import Reason

Validator = Callable[[Outcome], bool]


@dataclass(frozen=True)
class ActionPolicy:
    """One eviction action's rules for the victim search.

    ``preemptor_ok(job, tasks)`` returns True to go on, False to skip the job silently (the
    action does not apply to it) or a note saying why the action cannot help it.
    ``candidates(job, tasks)`` lists the victim jobs and the names of those whose gang core is
    protected (a minimum runtime: only their elastic surplus may go).
    ``make_validator(job, tasks)`` gives the check every simulated scenario must pass.
    ``describe(job, victim_task, outcome)`` words an eviction (message, reason).
    ``max_gain(job, tasks, contributions)`` bounds the GPUs the victims may give at most (e.g.
    reclaim's quota rules); when free GPUs plus that bound cannot cover the job, no victim set is
    ever tried. ``explain(job, "no_victims" | "no_scenario")`` words the note of a job the action
    tried and failed; notes are kept in ``session.action_notes`` (dropped again when a later action
    helps the job). ``moves_only``: every victim must be re-placed (consolidation).
    ``quick_screen(job, tasks)`` may give the screen's "no_victims" / "no_scenario" verdict before
    the victims are listed; it must give it exactly when the screen would, or None.
    ``objection_in_attempt``: a note from ``preemptor_ok`` is a failed attempt in KAI (checked
    inside the attempt, after the scheduling-signature skip), so the job becomes a representative
    of its signature (``signatures.Representatives``); otherwise KAI checks it before the skip.
    ``refusal_in_attempt(job, tasks)``: whether a plain refusal (False) from ``preemptor_ok`` is
    such a failed attempt (None: never).
    ``preemptible_preemptors``: only preemptible pending jobs enter the action's job order (the
    others still take part in its simulations as pending jobs)."""

    name: str
    preemptor_ok: Callable[[Job, list[Task]], bool | Note]
    candidates: Callable[[Job, list[Task]], tuple[list[Job], set[str]]]
    make_validator: Callable[[Job, list[Task]], Validator]
    describe: Callable[[Job, Task, Outcome], tuple[Reason, Reason]]
    max_gain: Callable[[Job, list[Task], list[Contribution]], float] | None = None
    explain: Callable[[Job, str], Note | None] | None = None
    moves_only: bool = False
    quick_screen: Callable[[Job, list[Task]], str | None] | None = None
    objection_in_attempt: bool = False
    refusal_in_attempt: Callable[[Job, list[Task]], bool] | None = None
    preemptible_preemptors: bool = False
