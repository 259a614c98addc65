"""The consolidation action (§3.6; KAI's ``actions/consolidation``): move running tasks to other
nodes so that a pending job fits, evicting nothing for good."""

from __future__ import annotations

from scheduler import reasons
from scheduler.actions.common.free_gpus import free_gpus
from scheduler.actions.common.notes import Note
from scheduler.actions.solvers.loop import run_action
from scheduler.actions.solvers.policy import ActionPolicy, Validator
from scheduler.actions.solvers.scenario import Outcome
from scheduler.actions.solvers.victim_jobs import victim_jobs
from scheduler.model import Job, Task
from scheduler.reasons import Reason, Ref
from scheduler.session import Session
from scheduler.state import EPS


class _Consolidation:
    """Consolidation's rules over one session."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def explain(self, job: Job, kind: str) -> Note | None:
        if kind == "no_scenario":
            return reasons.CONSOLIDATION_NOT_POSSIBLE, reasons.consolidation_not_possible()
        return None

    def preemptor_ok(self, job: Job, tasks: list[Task]) -> bool | Note:
        """Only a preemptible job, and only when the cluster has the GPUs free in total: moving
        tasks only gathers free room, it creates none (KAI consolidates preemptible jobs only)."""
        if not job.is_preemptible:
            return False
        need = sum(self.session.pending_request(t, for_limit=True)["gpu"] for t in tasks)
        return free_gpus(self.session) + EPS >= need

    def candidates(self, job: Job, tasks: list[Task]) -> tuple[list[Job], set[str]]:
        return victim_jobs(self.session, job), set()

    def make_validator(self, job: Job, tasks: list[Task]) -> Validator:
        """Every evicted task re-placed, and at most ``max_consolidation_preemptees`` jobs moved
        besides the preemptor (KAI's ``maxConsolidationPreemptees``)."""
        session = self.session
        limit = session.config.max_consolidation_preemptees + 1

        def validate(outcome: Outcome) -> bool:
            if outcome.victims:
                return False  # every evicted task must be re-placed
            return len({session.task_job[t.key].key for t in outcome.moved}) <= limit

        return validate

    def describe(self, job: Job, t: Task, outcome: Outcome) -> tuple[Reason, Reason]:
        vjob = self.session.task_job[t.key]
        msg = reasons.evicted_by_consolidation(Ref(t.key, vjob.namespace))
        return msg, reasons.victim_moved(Ref(job.key, bare=True, kind="job"))


def consolidation(session: Session) -> None:
    # KAI disables consolidation when the GPU or the CPU strategy is spread (§3.2)
    if session.config.any_spread or session.config.max_consolidation_preemptees <= 0:
        return
    rules = _Consolidation(session)
    policy = ActionPolicy(
        name="consolidation",
        preemptor_ok=rules.preemptor_ok,
        candidates=rules.candidates,
        make_validator=rules.make_validator,
        describe=rules.describe,
        explain=rules.explain,
        moves_only=True,
    )
    run_action(session, policy)
