"""The preempt action (§3.8; KAI's ``actions/preempt``): a pending job takes room from jobs of
lower priority in its own leaf queue."""

from __future__ import annotations

from scheduler import gpu_ledger, reasons
from scheduler.actions.common.notes import Note
from scheduler.actions.common.queues import request_of
from scheduler.actions.solvers import blockers
from scheduler.actions.solvers.loop import run_action
from scheduler.actions.solvers.policy import ActionPolicy, Validator
from scheduler.actions.solvers.scenario import Outcome
from scheduler.actions.solvers.victim_jobs import min_runtime_ok, split_candidates, victim_jobs
from scheduler.model import RESOURCES, Job, Task, clean
from scheduler.reasons import Reason, Ref
from scheduler.session import Session
from scheduler.state import EPS


def preempt_min_runtime(session: Session, victim_queue: str) -> float:
    """The victim's minimum runtime against preemption: the nearest queue up from the victim's
    that sets one (KAI's ``minruntime`` resolver for preempt)."""
    for qs in session.ancestors(victim_queue):
        if qs.queue.preempt_min_runtime_s is not None:
            return float(qs.queue.preempt_min_runtime_s)
    return 0.0


class _Preempt:
    """Preempt's rules over one session; ``core`` keeps each preemptor's protected victims."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.core: dict[str, set[str]] = {}
        # A job's blockers by (queue, priority, the queue's allocation stamp): they read only the
        # jobs of that queue below that priority and their placements, so the jobs of one queue
        # and priority share them until a job of the queue is charged or uncharged.
        self.found: dict[tuple[str, int, int], list[Reason]] = {}

    def preemptor_ok(self, job: Job, tasks: list[Task]) -> bool | Note:
        """A non-preemptible preemptor must stay within the quota of its queue and every ancestor
        (KAI: a non-preemptible job never runs over quota)."""
        if job.is_preemptible:
            return True
        j = request_of(self.session, tasks)
        for qs in self.session.ancestors(job.queue):
            for r in RESOURCES:
                if j[r] > EPS and qs.quota(r) >= 0 and clean(qs.allocated_np[r] + j[r]) > qs.quota(r) + EPS:
                    return reasons.PREEMPT_NOT_POSSIBLE, reasons.preempt_np_over_quota(qs.name)
        return True

    def explain(self, job: Job, kind: str) -> Note:
        session = self.session
        key = (job.queue, job.priority, session.queue_stamp.get(job.queue, 0))
        found = self.found.get(key)
        if found is None:  # (the preemptor is never below its own priority: no entry is its own)
            found = self.found[key] = blockers.find(
                session, "preempt", job, session.jobs_of_queue(job.queue),
                lambda v: v.priority < job.priority, lambda v: preempt_min_runtime(session, v.queue), False,
            )  # fmt: skip
        blockers.record(session, "preempt", job, list(found))
        if kind == "no_victims":
            return reasons.PREEMPT_NOT_POSSIBLE, reasons.preempt_no_victims(job.queue, job.priority)
        return reasons.PREEMPT_NOT_POSSIBLE, reasons.preempt_no_scenario(job.queue, job.priority)

    def candidates(self, job: Job, tasks: list[Task]) -> tuple[list[Job], set[str]]:
        """Preemptible jobs of the preemptor's own leaf queue with a lower priority, less those
        inside their minimum runtime (KAI's ``priority`` and ``minruntime`` preempt filters)."""
        session = self.session
        jobs = victim_jobs(session, job, job.queue, job.priority)
        out, prot = split_candidates(session, jobs, lambda v: preempt_min_runtime(session, v.queue))
        self.core[job.key] = prot
        return out, prot

    def make_validator(self, job: Job, tasks: list[Task]) -> Validator:
        return lambda outcome: min_runtime_ok(self.session, outcome, self.core.get(job.key, set()))

    def describe(self, job: Job, t: Task, outcome: Outcome) -> tuple[Reason, Reason]:
        vjob = self.session.task_job[t.key]
        msg = reasons.evicted_by_preempt(Ref(t.key, vjob.namespace), Ref(job.key, job.namespace, kind="job"))
        why = reasons.victim_lower_priority(
            vjob.priority, job.priority, Ref(job.key, bare=True, kind="job"), job.queue
        )
        return msg, why


def preempt(session: Session) -> None:
    rules = _Preempt(session)
    policy = ActionPolicy(
        name="preempt",
        preemptor_ok=rules.preemptor_ok,
        candidates=rules.candidates,
        make_validator=rules.make_validator,
        describe=rules.describe,
        explain=rules.explain,
        # KAI checks a non-preemptible preemptor's quota inside the attempt
        # (``actions/preempt/preempt.go``, ``attemptToPreemptForPreemptor``): a refusal is a failed
        # attempt and makes the job its signature's representative.
        objection_in_attempt=True,
    )
    # KAI's node GPU counters, kept by the statements from here on and read by whole-GPU fits
    # (gpu_ledger.py; a KAI quirk, on by default: Config.kai_gpu_counter_drift)
    gpu_ledger.keep(session)
    run_action(session, policy)
