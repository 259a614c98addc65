"""Per-leaf sums of what victim jobs give, for reclaim's max-gain screen without a pass over the
victim jobs of every preemptor.

Reclaim's screen (``reclaim.gain.max_gain``) needs, per diverging victim queue V*, only the
GPUs of all the chunks its victim jobs give and the largest chunk. Those are sums and maxima over
the jobs of each leaf queue, which change only when one of the leaf's jobs is charged or
uncharged - every placement, eviction, re-placement and undo goes through
``Session._charge_queues``, which bumps ``session.queue_stamp[leaf]`` - so a leaf's sums are kept
for its stamp and the screen costs one look per leaf.

They are exact only where the order of additions cannot matter: every GPU charge a multiple of
1/4 (then every partial sum is exact, as in ``session.exact_sums``). A leaf with another amount,
or a job with sub-groups (whose chunks depend on ``gang.surplus_task``'s sub-group rules), has no
sums (None), and the screen falls back to the job-by-job contributions.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.model import TaskState
from scheduler.session import Session
from scheduler.state import LoadedVictims

_ACTIVE = (TaskState.RUNNING, TaskState.ALLOCATED, TaskState.PIPELINED)  # = gang.ACTIVE_ALLOCATED

# Bound under which sums of quarters are exact (see ``session.exact_sums``).
_EXACT_BOUND = 2.0**30


@dataclass(frozen=True)
class LeafVictims:
    """What the preemptible jobs with active pods of one leaf queue give, none protected."""

    jobs: int  # such jobs (each gives at least one chunk)
    gpu: float  # GPUs of all their chunks
    biggest: float  # GPUs of the largest chunk (0.0 without jobs)
    first: str | None  # the first such job in ``session.jobs`` order
    started: bool  # some such job has a start time (a minimum runtime could protect it)


def leaf_victims(session: Session, leaf: str) -> LeafVictims | None:
    """The leaf's sums as of its current allocation stamp (None: not exact, see the module)."""
    stamp = session.queue_stamp.get(leaf, 0)
    hit = session.leaf_victims.get(leaf)
    if hit is not None and hit[0] == stamp:
        return hit[1]  # type: ignore[return-value]
    loaded = session.loaded_victims.get(leaf)
    if loaded is not None and loaded[0] == stamp:
        sums = _as_loaded(loaded[1])  # nothing of the leaf changed since the load summed it
    else:
        sums = _leaf_victims(session, leaf)
    session.leaf_victims[leaf] = (stamp, sums)
    return sums


def _as_loaded(v: LoadedVictims) -> LeafVictims | None:
    """The sums ``Session.load_tasks`` kept for a leaf of one-pod jobs: each GPU charge a whole
    count, so exact in quarters below the bound, as ``_leaf_victims`` checks."""
    if v.jobs >= 2**20 or v.biggest >= _EXACT_BOUND:
        return None
    return LeafVictims(v.jobs, v.gpu, v.biggest, v.first, v.started)


def _leaf_victims(session: Session, leaf: str) -> LeafVictims | None:
    placements = session.placements
    # A task without a stored placement runs as loaded, on its pinned whole GPUs: its charge is
    # read off the task instead of making the placement (``state.Placements``).
    as_loaded = placements.deferring
    active = _ACTIVE
    jobs = 0
    total = 0.0
    biggest = 0.0
    first: str | None = None
    started = False
    seen: set[float] = set()  # every GPU charge, checked for quarters at the end
    for job in session.jobs_of_queue(leaf):
        tasks = job.tasks
        if len(tasks) == 1:
            # the common case, inline: one active pod is one chunk whatever the gang minimum
            p = placements.get(tasks[0].key)
            if p is None:
                if not as_loaded or not job.is_preemptible:
                    continue
                g = float(int(tasks[0].gpu))
            elif p.status not in active or not job.is_preemptible:
                continue
            else:
                g = p.charge.get("gpu", 0.0)
            if job.subgroups:
                return None
            seen.add(g)
            total += g
            if g > biggest:
                biggest = g
        else:
            gs: list[float] = []
            for t in tasks:
                p = placements.get(t.key)
                if p is None:
                    if as_loaded:
                        gs.append(float(int(t.gpu)))
                elif p.status in active:
                    gs.append(p.charge.get("gpu", 0.0))
            if not gs or not job.is_preemptible:
                continue
            if job.subgroups:
                return None
            seen.update(gs)
            # ``victim_order.victim_chunks`` with nothing protected: the active pods in reverse order
            # give one at a time while more than the gang minimum are left, then the rest as one.
            m = job.gang_min
            n = len(gs)
            core = gs[: min(n, m)] if m > 0 else []
            if core:
                biggest = max(biggest, sum(core))
            if n > m:
                biggest = max(biggest, max(gs[max(m, 0) :]))
            total += sum(gs)
        jobs += 1
        if first is None:
            first = job.key
        if job.last_start_s is not None:
            started = True
    if jobs >= 2**20 or not all(abs(g) < _EXACT_BOUND and float(g * 4).is_integer() for g in seen):
        return None
    return LeafVictims(jobs, total, biggest, first, started)


def job_position(session: Session, name: str) -> int:
    """Where a job stands in ``session.jobs`` (the order victim jobs are listed in)."""
    if session.job_positions is None:
        session.job_positions = {n: i for i, n in enumerate(session.jobs)}
    return session.job_positions[name]
