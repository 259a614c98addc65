"""The eviction actions' job loop (KAI's ``Execute`` of reclaim, preempt and consolidation
around ``JobSolver.Solve``): pop eligible pending jobs in job order and try to make room for each.

A preemptor job's next step (its missing gang members, or one elastic extra) is placed by
virtually evicting victims, re-placing whatever of them still fits elsewhere, and placing the
preemptor (pipelined) in normal job order (kai-semantics.md §3.9, §4.4). The pieces:

* :mod:`.screening` screens a job before any search (and carries failures over to alike jobs),
  :mod:`.signatures` skips jobs not easier than one whose search failed;
* :mod:`.victim_order` lists the victims' contributions in victim order;
* :mod:`.job_solver` searches one step: :mod:`.free_capacity` screens, :mod:`.scenario_generators`
  proposes victim sets and :mod:`.simulation` tries each one, in :mod:`.allocate_order`;
* :mod:`.budget` bounds the whole action's work; :mod:`.records` keeps notes and evictions.

What differs between the actions is their :class:`~.policy.ActionPolicy`.
"""

from __future__ import annotations

from scheduler.actions.allocate import eligible
from scheduler.actions.common.eligibility import preemption_delay_note, within_preemption_delay
from scheduler.actions.common.notes import Note
from scheduler.actions.solvers.allocate_order import PendingHeads
from scheduler.actions.solvers.budget import PLACE_UNITS, now_s, out_of_time, spend
from scheduler.actions.solvers.job_solver import solve
from scheduler.actions.solvers.policy import ActionPolicy
from scheduler.actions.solvers.records import add_note, record
from scheduler.actions.solvers.screening import JobScreen, Search
from scheduler.actions.solvers.signatures import Representatives
from scheduler.actions.solvers.simulation import SolveLog
from scheduler.actions.solvers.victim_order import KeyMemo, victim_stream
from scheduler.model import Job
from scheduler.ordering import JobQueue
from scheduler.session import Session

# Screen every job before ordering any (tests switch it off to compare with the ordered loop).
SCREEN_FIRST = True

# KAI's scheduling signatures (``--use-scheduling-signatures``, on by default): a job is not
# searched for when it is not easier than a job of the same signature whose search failed
# (tests switch it off to compare the exact shortcuts with a search per job).
SIGNATURES = True


def run_action(session: Session, policy: ActionPolicy) -> None:
    """Run one eviction action: screen the waiting jobs, then search for them in job order."""
    session.deadline = now_s() + max(0.0, session.config.action_time_budget_s)
    session.work_left = session.config.action_work_budget
    session.action = policy.name
    # Every action's simulation orders the jobs with all pending ones in (consolidation too: its
    # solver runs the same by_pod_solver, whose GetJobsToAllocate starts from
    # utils.GetAllPendingJobs), so a leaf queue is represented by its best pending job even when
    # that job is not the preemptor or a victim (kai_diff seed 83041: a big non-preemptible job
    # puts its queue after the victim's, which is re-placed first).
    heads = PendingHeads(session)
    waiting = _waiting_jobs(session, heads, policy.preemptible_preemptors)
    screen = JobScreen(session, policy, heads)
    if SCREEN_FIRST and not _needs_search(session, screen, waiting):
        return
    _ActionLoop(session, policy, heads, screen).run(waiting)


def _waiting_jobs(session: Session, heads: PendingHeads | None, preemptible_only: bool) -> list[Job]:
    """The eligible pending jobs past their preemption delay (the others get its note); every
    eligible one is a pending head the simulations must see (``PendingHeads``).

    ``preemptible_only``: a non-preemptible job is left out of the job order, before the delay
    check, as consolidation's ``JobsOrderByQueues`` filters it (``FilterNonPreemptible``, checked
    before ``FilterWithinPreemptionDelay`` in ``actions/utils/input_jobs.go``). It matters beyond
    the job itself: a leaf queue's place in the order is judged with its best job, so a
    non-preemptible head put its queue in another place (kai_diff seed 83021)."""
    waiting: list[Job] = []
    for candidate in session.pending_jobs():
        if not eligible(session, candidate):
            continue
        if heads is not None:
            heads.add(candidate)
        if preemptible_only and not candidate.is_preemptible:
            continue
        if within_preemption_delay(session, candidate):
            add_note(session, candidate, preemption_delay_note(session, candidate))
            continue
        waiting.append(candidate)
    if heads is not None:
        heads.freeze()
    return waiting


def _needs_search(session: Session, screen: JobScreen, waiting: list[Job]) -> bool:
    """Whether some waiting job passes the screen; when none does, their notes are kept.

    Until something is committed the state stays as it is, so the jobs the action cannot help
    get the same notes in any order: when no job needs a search (as in most cycles of a full
    cluster), the action ends without ordering the jobs at all."""
    notes: list[tuple[Job, Note]] = []
    for candidate in waiting:
        if out_of_time(session):
            break  # as the ordered loop: the jobs screened so far keep their notes
        first_note, search = screen.screen(candidate, in_order=False)
        if search is not None:
            return True
        if first_note is not None:
            notes.append((candidate, first_note))
    for candidate, first_note in notes:
        add_note(session, candidate, first_note)
    return False


class _ActionLoop:
    """The ordered loop of one action run: job order, one search per job that passes."""

    def __init__(
        self, session: Session, policy: ActionPolicy, heads: PendingHeads | None, screen: JobScreen
    ) -> None:
        self.session = session
        self.policy = policy
        self.heads = heads
        self.screen = screen
        # KAI's scheduling signatures: the smallest job whose victim search failed, per leaf queue
        # (reclaim, preempt) or for the whole action (consolidation) and constraint signature;
        # kept for the whole action, commits included (``Representatives``).
        self.representatives = Representatives(per_queue=not policy.moves_only) if SIGNATURES else None
        self.stream_keys: KeyMemo = {}  # victim order keys of every stream this action builds

    def note(self, job: Job, kind: str) -> None:
        note = self.screen.note_of(job, kind)
        if note is not None:
            add_note(self.session, job, note)

    def run(self, waiting: list[Job]) -> None:
        session = self.session
        queue = JobQueue(session, session.capacity)
        for candidate in waiting:
            queue.push(candidate)
        while (job := queue.pop()) is not None:
            if out_of_time(session):
                break
            note, search = self.screen.screen(job, in_order=True)
            if note is not None:
                add_note(session, job, note)
            if search is None:
                reps = self.representatives
                if self.screen.attempt_failed and reps is not None and reps.easier(session, job):
                    # KAI's reclaim / preempt ``Execute``: every failed attempt of a job past the
                    # signature skip (no victims, no scenario, a refusal inside the attempt)
                    # updates its signature's representative, not only a search that ran; a
                    # screen-out is such a failure.
                    reps.update(session, job)
                continue
            if self.representatives is not None and not self.representatives.easier(session, job):
                # KAI's ``MinimalJobRepresentatives``: not easier than a job whose search failed
                self.note(job, "no_scenario")
                continue
            budget = session.config.action_work_budget
            if budget > 0 and session.work_left < PLACE_UNITS * len(search.victims):
                # ordering them would spend the rest of the budget (a contribution or more per job):
                # stop now rather than after the work (deterministic, as every other budget stop)
                session.work_left = 0
                out_of_time(session)
                break
            self.search(job, search)

    def search(self, job: Job, search: Search) -> None:
        """Order the job's victims and search for a scenario; commit and record the one found."""
        session = self.session
        stream = victim_stream(session, search.victims, search.core_protected, memo=self.stream_keys)
        spend(session, PLACE_UNITS * len(stream))
        if not stream:
            self.note(job, "no_victims")
            self.screen.no_victims(job, search)
            return
        tasks = search.tasks
        stmt = session.statement()
        log = SolveLog()
        validator = self.policy.make_validator(job, tasks)
        outcome = solve(
            session, stmt, job, tasks, stream, validator, self.heads, self.policy.moves_only, log,
            make_validator=lambda part: self.policy.make_validator(job, part),
        )  # fmt: skip
        if outcome is None:
            stmt.rollback()
            self.note(job, "no_scenario")
            if not out_of_time(session):
                self.screen.search_failed(job, search, log)
                if self.representatives is not None:
                    self.representatives.update(session, job)
            return
        stmt.commit()
        self.screen.committed()
        session.action_notes.pop(job.key, None)
        record(session, self.policy.name, job, outcome, self.policy.describe)
