"""The consolidation action (§3.6; KAI's ``actions/consolidation``): move running tasks to other
nodes so that a pending job fits, evicting nothing for good."""

from __future__ import annotations

import math

from scheduler import gpu_ledger, reasons
from scheduler.actions.allocate import pre_predicate_error
from scheduler.actions.common.notes import Note
from scheduler.actions.solvers.loop import run_action
from scheduler.actions.solvers.policy import ActionPolicy, Validator
from scheduler.actions.solvers.scenario import Outcome
from scheduler.actions.solvers.victim_jobs import victim_jobs
from scheduler.model import Job, Task
from scheduler.reasons import Reason, Ref
from scheduler.session import Session
from scheduler.state import EPS


def _hundredths_up(memory: float, device: float) -> float:
    """A shared GPU's portion as KAI reads it: rounded up to hundredths
    (``node_info.getGpuMemoryFractionalOnNode``)."""
    return math.ceil(memory / device * 100) / 100


def allocatable_gpus(session: Session) -> tuple[float, float]:
    """``allocatable_gpus_scan``, kept per node version: consolidation asks it for every pending
    job, and between two asks nothing changes unless a search was simulated (8,000 jobs x 5,000
    nodes was 40 s of the stress benchmark's cycle)."""
    return session.per_node_version(allocatable_gpus_scan)


def allocatable_gpus_scan(session: Session) -> tuple[float, float]:
    """Idle plus releasing GPUs and their memory over the schedulable nodes, as KAI's
    ``utils.getSumOfAvailableGPUs`` sums them (``NodeInfo.GetSumOfIdleGPUs`` and
    ``GetSumOfReleasingGPUs``) from its node counters: while consolidation runs, KAI's own, kept
    by the statements (``session.gpu_ledger``, ``scheduler/gpu_ledger.py``). Without the ledger,
    the same sum from the devices: a whole GPU that is idle or releasing counts 1; a shared GPU
    in use counts 1 less its allocated portion (releasing members included) rounded up to
    hundredths, plus its releasing portion rounded up the same way."""
    ledger = session.gpu_ledger
    if ledger is not None:
        return ledger.total()
    gpus = 0.0
    memory = 0.0
    for ns in session.nodes.values():
        if not ns.schedulable:
            continue
        for d in ns.devices:
            if d.memory <= 0:
                continue
            if d.whole or d.active <= EPS:
                if d.active <= EPS:  # idle, releasing whole, or a group whose members all release
                    gpus += 1
                    memory += d.memory
                continue
            allocated = d.active + d.releasing
            gpus += 1 - _hundredths_up(allocated, d.memory)
            memory += d.memory - allocated
            if d.releasing > EPS:
                gpus += _hundredths_up(d.releasing, d.memory)
                memory += d.releasing
    return gpus, memory


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
        tasks only gathers free room, it creates none (KAI consolidates preemptible jobs only).

        The total is counted as KAI counts it (``utils.IsEnoughGPUsAllocatableForJob``, from
        ``consolidation.go: attemptToConsolidateForPreemptor``): the step's GPUs (a fraction's
        portion times its devices; a GPU-memory request asks none) against the idle and releasing
        GPUs, and the step's GPU memory against their memory (``allocatable_gpus``)."""
        if not job.is_preemptible:
            return False
        gpus = sum(t.gpu * t.fraction_device_count for t in tasks)
        memory = sum(t.gpu_memory_mib * t.fraction_device_count for t in tasks if t.gpu == 0)
        free, free_memory = allocatable_gpus(self.session)
        return free >= gpus and free_memory >= memory

    def refused_in_attempt(self, job: Job, tasks: list[Task]) -> bool:
        """Whether KAI refuses this job inside its attempt, which makes it its signature's
        representative. ``consolidation.go: Execute`` skips a job not easier than a representative,
        then one whose task fails a victim-invariant pre-predicate (``common.
        VictimInvariantPrePredicateFailureForTasks``: no node of the pool could ever hold it) with
        ``continue``, and only then checks ``IsEnoughGPUsAllocatableForJob`` inside
        ``attemptToConsolidateForPreemptor``; refused there, it returns no ``SearchResult``,
        ``shouldStopActionForSearchResult(nil)`` is false (``SearchResult.Reason`` of a nil result
        is ""), and ``Execute`` calls ``smallestFailedJobs.UpdateRepresentative(job)``."""
        return job.is_preemptible and not any(pre_predicate_error(self.session, job, t) for t in tasks)

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
        # consolidation.go: Execute orders only preemptible pending jobs (FilterNonPreemptible)
        preemptible_preemptors=True,
        refusal_in_attempt=rules.refused_in_attempt,
    )
    # KAI's node GPU counters, kept by every statement from here on (gpu_ledger.py): a KAI
    # quirk, on by default (Config.kai_gpu_counter_drift)
    gpu_ledger.keep(session)
    session.node_memo.pop(allocatable_gpus_scan, None)  # a sum kept from before the ledger
    run_action(session, policy)
