"""The per-job screen of the eviction actions: everything before a job's victim search, which
changes nothing, and the failures that carry over to alike jobs.

A job is screened out (with a note) when the action does not apply to it, when an alike job's
search already failed in a state the job would meet too, when the action's quick screen or its
bound on what the victims may give proves that no scenario can work, or when it has no victims.
KAI screens jobs in the action's ``Execute`` and its ``PrePredicate`` / ``CanReclaimResources``
plugin callbacks; the alike-job carry-over has no KAI counterpart (an exact shortcut, held
against a search per job by tests/engine/test_alike_preemptors.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Literal

from scheduler import gang
from scheduler.actions.common.notes import Note
from scheduler.actions.solvers.allocate_order import PendingHeads
from scheduler.actions.solvers.budget import spend
from scheduler.actions.solvers.free_capacity import FreeTracker, usable_nodes
from scheduler.actions.solvers.policy import ActionPolicy
from scheduler.actions.solvers.simulation import SolveLog
from scheduler.actions.solvers.victim_order import victim_chunks
from scheduler.model import Job, Task, TaskState
from scheduler.ordering import job_key
from scheduler.session import Session
from scheduler.state import EPS


@dataclass
class Search:
    """A job's victim search, as the screens leave it."""

    tasks: list[Task]
    victims: list[Job]
    core_protected: set[str]
    sig: tuple[object, ...] | None


def _alike(session: Session, job: Job, tasks: list[Task]) -> tuple[object, ...] | None:
    """What the victim search sees of a preemptor, for jobs it treats the same way: queue,
    priority, preemptibility, node selector and the shapes of the step's tasks. None for a job
    whose own pods or rules enter the search (pods already active, placement rules, topology,
    sub-groups): it is always searched for itself."""
    if job.has_rules or job.topology is not None or job.subgroups or len(tasks) != len(job.tasks):
        return None
    if any(gang.status(session, t) != TaskState.PENDING for t in job.tasks):
        return None
    shapes = tuple(
        (t.gpu, t.gpu_memory_mib, t.cpu_millis, t.memory_mib, t.gpu_fraction_devices, t.subgroup)
        for t in tasks
    )
    return (job.queue, job.priority, job.is_preemptible, tuple(sorted(job.node_selector.items())), shapes)


# How a failure of job ``a`` carries over to an alike job ``b`` (``_carries``).
Carry = Literal["any", "turn", "later"]

# Let a search failure judged with no victim left after the preemptor carry to every alike job
# later in its leaf (``_carries``, "later"); tests switch it off to compare with ``_same_turn``.
REUSE_LAST = True


def _carries(session: Session, heads: PendingHeads, carry: Carry, a: Job, b: Job, in_order: bool) -> bool:
    """Whether ``b`` gets the note of the alike job ``a`` without a search of its own.

    * "any": ``a`` failed a screen or had no victims, which depend only on what ``_alike`` keeps.
    * "turn": ``a``'s search failed at or before the preemptor's placement: ``b`` must meet the
      state ``a`` met at its turn (``_same_turn``).
    * "later": moreover, in every scenario ``a``'s search simulated, every victim job came before
      the preemptor in allocate order (``SolveLog.last``). For ``b`` later in the same leaf's job
      order, ``AllocateOrder`` represents the leaf by the same pending jobs up to and including
      ``a`` (now another pending job, asking what ``a`` asked), so each scenario runs exactly as
      it did for ``a`` until ``a``'s turn; no victim job is left then, so only pending jobs of
      the leaf, which the simulation skips without changing anything, stand between that point
      and ``b``'s turn. ``b`` is placed in the state ``a`` was, with the same shapes and rules,
      and fails the same way in every scenario - and so does the search, whose choice of
      scenarios depends only on their results, on the victims and on the preemptor's shapes.
    """
    if carry == "any":
        return True
    if not in_order:
        return False
    if carry == "later":
        return (job_key(session, a), a.key) < (job_key(session, b), b.key)
    return _same_turn(session, heads, a, b)


def _same_turn(session: Session, heads: PendingHeads, a: Job, b: Job) -> bool:
    """Whether a search for ``b`` meets the state ``a``'s met when each preemptor came up.

    ``AllocateOrder`` represents the preemptor's leaf by the leaf's pending jobs in job order
    (``heads``) until the preemptor's turn. Between ``a`` and ``b`` in that order every pending
    job asks for the same as ``a``: the leaf then has one key throughout, wins every turn in a
    row without any state changing, so ``b`` is placed in the very state ``a`` was. A search
    that failed at or before the preemptor's placement in every scenario (``SolveLog.late``
    unset) fails for ``b`` too."""
    lst = heads.by_leaf.get(b.queue, [])
    ka = (job_key(session, a), a.key)
    kb = (job_key(session, b), b.key)
    if not ka < kb:
        return False
    req = heads.request(a)
    i = bisect.bisect_left(lst, ka)
    j = bisect.bisect_left(lst, kb)
    for _key, name in lst[i:j]:
        x = session.jobs[name]
        if gang.pending_tasks(session, x) and heads.request(x) != req:
            return False
    return True


class JobScreen:
    """The screen of one action run, with the failures it remembers.

    ``failed``: failed jobs by ``_alike`` signature since the last commit (a failed search rolls
    back, so until a commit the session is as it was): the note kind, the job, and how the failure
    carries over to an alike job (``_carries``)."""

    def __init__(self, session: Session, policy: ActionPolicy, heads: PendingHeads | None) -> None:
        self.session = session
        self.policy = policy
        self.heads = heads
        self.failed: dict[tuple[object, ...], tuple[str, Job, Carry]] = {}
        # Whether the last screened-out job failed what KAI counts as its attempt (its search, or
        # a check inside the attempt): KAI then makes it a representative (``signatures``).
        self.attempt_failed = False

    def note_of(self, job: Job, kind: str) -> Note | None:
        explain = self.policy.explain
        return explain(job, kind) if explain is not None else None

    def screen(self, job: Job, in_order: bool) -> tuple[Note | None, Search | None]:
        """(a note or None, None) for a job the action cannot help, (None, the search's inputs)
        for one it must search for. ``in_order``: jobs come in job order (a failed search may
        carry over)."""
        session, policy, heads, failed = self.session, self.policy, self.heads, self.failed
        self.attempt_failed = False
        tasks = gang.step_tasks(session, job)
        if not tasks:
            return None, None
        ok = policy.preemptor_ok(job, tasks)
        if ok is not True:
            if ok is False:
                in_attempt = policy.refusal_in_attempt
                self.attempt_failed = in_attempt is not None and in_attempt(job, tasks)
            else:
                self.attempt_failed = policy.objection_in_attempt
            return (ok if ok is not False else None), None
        # From here on every screen-out stands for a search KAI would run and see fail.
        self.attempt_failed = True
        sig = _alike(session, job, tasks) if heads is not None else None
        hit = failed.get(sig) if sig is not None else None
        if hit is not None and heads is not None and _carries(session, heads, hit[2], hit[1], job, in_order):
            failed[sig] = (hit[0], job, hit[2])  # type: ignore[index]
            return self.note_of(job, hit[0]), None
        kind = policy.quick_screen(job, tasks) if policy.quick_screen is not None else None
        if kind is not None:
            if sig is not None:
                failed[sig] = (kind, job, "any")
            return self.note_of(job, kind), None
        victims, core_protected = policy.candidates(job, tasks)
        spend(session, 1)
        if policy.max_gain is not None:
            # The bound needs only what the victims give, not in which order: screen with the
            # unordered contributions and order them only for a job that passes.
            chunks = victim_chunks(session, victims, core_protected) if victims else []
            if not chunks:
                kind = "no_victims"
            else:
                tracker = FreeTracker(session, usable_nodes(session, job), tasks)
                spend(session, len(tracker.nodes))
                if tracker.free_gpu + policy.max_gain(job, tasks, chunks) + EPS < tracker.need_gpu:
                    kind = "no_scenario"
        if kind is None and not victims:
            kind = "no_victims"
        if kind is not None:
            if sig is not None:
                failed[sig] = (kind, job, "any")
            return self.note_of(job, kind), None
        self.attempt_failed = False
        return None, Search(tasks, victims, core_protected, sig)

    def no_victims(self, job: Job, search: Search) -> None:
        """The job's victim stream came out empty: alike jobs have none either."""
        if search.sig is not None:
            self.failed[search.sig] = ("no_victims", job, "any")

    def search_failed(self, job: Job, search: Search, log: SolveLog) -> None:
        """The job's search found no scenario (within budget): how the failure carries over."""
        if search.sig is not None and not log.late:
            self.failed[search.sig] = ("no_scenario", job, "later" if log.last and REUSE_LAST else "turn")

    def committed(self) -> None:
        """A scenario was committed: the state changed, no failure carries over any more."""
        self.failed.clear()
