"""The reclaim action (§3.7; KAI's ``actions/reclaim``): a job of a queue below its fair share
takes room from queues above theirs, under the rules of :mod:`.rules`."""

from __future__ import annotations

from collections.abc import Callable

from scheduler import gang, gpu_ledger, reasons
from scheduler.actions.common.notes import Note
from scheduler.actions.common.queues import diverging, request_of
from scheduler.actions.reclaim import gain
from scheduler.actions.reclaim.rules import (
    ReclaimStep,
    may_reclaim_from,
    reclaim_min_runtime,
    reclaimer_objection,
    scenario_holds,
)
from scheduler.actions.reclaim.victim_sums import leaf_victims
from scheduler.actions.solvers import blockers
from scheduler.actions.solvers.loop import run_action
from scheduler.actions.solvers.policy import ActionPolicy, Validator
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.actions.solvers.victim_jobs import split_candidates, victim_jobs
from scheduler.model import RESOURCES, Job, Task
from scheduler.reasons import Reason, Ref
from scheduler.session import Session
from scheduler.state import QueueState

# Reclaim's screen from per-leaf sums first (tests switch it off to compare with the job-by-job
# screen).
QUICK_SCREEN = True


class _Reclaim:
    """Reclaim's rules over one session, with what they remember across its jobs: each
    reclaimer's protected victims (``core``) and the queues' usage lines."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.core: dict[str, set[str]] = {}
        # A queue's usage line by (queue, allocation, fair-share dict): the victims of one
        # scenario are described in one state, mostly from a few queues.
        self.usage_lines: dict[tuple[str, tuple[float, ...]], tuple[object, Reason]] = {}

    def preemptor_ok(self, job: Job, tasks: list[Task]) -> bool | Note:
        note = reclaimer_objection(self.session, job, request_of(self.session, tasks))
        return True if note is None else note

    def explain(self, job: Job, kind: str) -> Note:
        blockers.record(self.session, "reclaim", job, self.blockers(job))
        if kind == "no_victims":
            return reasons.RECLAIM_NOT_POSSIBLE, reasons.reclaim_no_victims(job.queue)
        return reasons.RECLAIM_NOT_POSSIBLE, reasons.reclaim_no_scenario(job.queue)

    def candidates(self, job: Job, tasks: list[Task]) -> tuple[list[Job], set[str]]:
        """Preemptible jobs of other leaf queues that ``may_reclaim_from`` allows, less those
        inside their minimum runtime (``reclaim_min_runtime``)."""
        session = self.session
        j = request_of(session, tasks)
        allowed: dict[str, bool] = {}
        jobs = []
        for v in victim_jobs(session, job):
            if v.queue == job.queue:
                continue
            if v.queue not in allowed:
                allowed[v.queue] = may_reclaim_from(session, job.queue, v.queue, j)
            if allowed[v.queue]:
                jobs.append(v)
        runtimes: dict[str, float] = {}  # per victim queue: the rule depends on the queues only

        def min_runtime(v: Job) -> float:
            if v.queue not in runtimes:
                runtimes[v.queue] = reclaim_min_runtime(session, job.queue, v.queue)
            return runtimes[v.queue]

        out, prot = split_candidates(session, jobs, min_runtime)
        self.core[job.key] = prot
        return out, prot

    def blockers(self, job: Job) -> list[Reason]:
        """What the search met (``solvers.blockers``), with ``candidates``' rules, for the job page."""
        session = self.session
        j = request_of(session, gang.step_tasks(session, job))
        allowed: dict[str, bool] = {}

        def may_take(v: Job) -> bool:
            if v.queue == job.queue:
                return False
            if v.queue not in allowed:
                allowed[v.queue] = may_reclaim_from(session, job.queue, v.queue, j)
            return allowed[v.queue]

        runtimes: dict[str, float] = {}  # per victim queue, as in ``candidates``: one walk per queue

        def min_runtime(v: Job) -> float:
            if v.queue not in runtimes:
                runtimes[v.queue] = reclaim_min_runtime(session, job.queue, v.queue)
            return runtimes[v.queue]

        jobs, known = self._blocker_scan(job, may_take, min_runtime)
        return blockers.find(session, "reclaim", job, jobs, may_take, min_runtime, True, known)

    def _blocker_scan(
        self, job: Job, may_take: Callable[[Job], bool], min_runtime: Callable[[Job], float]
    ) -> tuple[list[Job], list[str]]:
        """The jobs ``blockers.find`` must look at one by one, and the leaf queues it need not
        list: a leaf whose victim sums (``victim_sums``, kept for the screen) count a victim job
        and where none can be protected (no start time, or no minimum runtime) is a source as a
        whole. Reclaim's ``may_take`` depends on the victim's queue only, so a leaf it refuses is
        skipped whole too; the other leaves' jobs are listed (in job order within each leaf:
        ``find`` sorts what it reports)."""
        session = self.session
        scan: list[Job] = []
        known: list[str] = []
        for leaf, qs in session.queues.items():
            if not qs.is_leaf:
                continue
            jobs = session.jobs_of_queue(leaf)
            if not jobs or not may_take(jobs[0]):
                continue
            sums = leaf_victims(session, leaf)
            if sums is not None and (not sums.started or min_runtime(jobs[0]) <= 0):
                if sums.jobs:
                    known.append(leaf)
                continue
            scan.extend(jobs)
        return scan, known

    def make_validator(self, job: Job, tasks: list[Task]) -> Validator:
        step = ReclaimStep(self.session, job, request_of(self.session, tasks), self.core)
        return lambda outcome: scenario_holds(step, outcome)

    def usage_line(self, q: QueueState) -> Reason:
        key = (q.name, tuple(q.allocated.values()))
        hit = self.usage_lines.get(key)
        if hit is not None and hit[0] is q.fair_share:
            return hit[1]
        line = reasons.queue_usage_line(
            q.name, q.allocated, {r: q.quota(r) for r in RESOURCES}, q.fair_share, q.queue.priority
        )
        self.usage_lines[key] = (q.fair_share, line)
        return line

    def describe(self, job: Job, t: Task, outcome: Outcome) -> tuple[Reason, Reason]:
        session = self.session
        vjob = session.task_job[t.key]
        vq, rq = session.queues[vjob.queue], session.queues[job.queue]
        if vq.queue.parent != rq.queue.parent:
            vq, rq = diverging(session, vjob.queue, job.queue)
        lines = [self.usage_line(q) for q in (vq, rq)]
        msg = reasons.evicted_by_reclaim(
            Ref(t.key, vjob.namespace), Ref(job.key, job.namespace, kind="job"), lines
        )
        why = reasons.victim_over_fair_share(
            vjob.queue, Ref(vjob.key, bare=True, kind="job"), vjob.priority, job.queue
        )
        return msg, why

    def max_gain(self, job: Job, tasks: list[Task], stream: list[Contribution]) -> float:
        return gain.max_gain(self.session, job, tasks, stream)

    def quick_screen(self, job: Job, tasks: list[Task]) -> str | None:
        return gain.quick_screen(self.session, job, tasks)


def reclaim(session: Session) -> None:
    rules = _Reclaim(session)
    policy = ActionPolicy(
        name="reclaim",
        preemptor_ok=rules.preemptor_ok,
        candidates=rules.candidates,
        make_validator=rules.make_validator,
        describe=rules.describe,
        max_gain=rules.max_gain,
        explain=rules.explain,
        quick_screen=rules.quick_screen if QUICK_SCREEN else None,
    )
    # KAI's node GPU counters, kept by the statements from here on and read by whole-GPU fits
    # (gpu_ledger.py; a KAI quirk, on by default: Config.kai_gpu_counter_drift)
    gpu_ledger.keep(session)
    run_action(session, policy)
