"""Plain data classes the engine reads: nodes, the queue tree, jobs and tasks.

Units: GPUs are devices (fractions allowed, 2 decimals), CPU is millicores,
memory (node, task and queue) is MiB. Times are seconds before ``Config.now``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

RESOURCES: tuple[str, ...] = ("gpu", "cpu", "memory")
UNLIMITED = -1.0
DEFAULT_POOL = "default"
# Node label that names a node pool; a job's node selector may name it too.
POOL_LABEL = "kai.scheduler/node-pool"
# Placement strategies: KAI's two, and the fragmentation-aware one (scheduler/fragmentation.py).
PLACEMENTS: tuple[str, ...] = ("binpack", "spread", "fragmentation")
DEFAULT_ACTIONS: tuple[str, ...] = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


class TaskState(StrEnum):
    """Task status. Allocated/Pipelined only appear in results (virtual, inside a cycle)."""

    PENDING = "Pending"
    RUNNING = "Running"
    RELEASING = "Releasing"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"


# Node label that names the node itself (Kubernetes sets it on every node).
HOSTNAME_LABEL = "kubernetes.io/hostname"
TAINT_EFFECTS: tuple[str, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MATCH_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True)
class Taint:
    """A node taint; NoSchedule and NoExecute keep pods that do not tolerate it off the node,
    PreferNoSchedule only scores the node lower."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration (Kubernetes semantics): ``Exists`` with an empty key tolerates every
    taint; an empty ``effect`` matches every effect."""

    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class MatchExpression:
    """A node selector requirement: In, NotIn, Exists, DoesNotExist, Gt, Lt (one integer value)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreferredTerm:
    """A preferred node affinity term: nodes matching every expression gain ``weight``."""

    weight: int
    expressions: tuple[MatchExpression, ...] = ()


@dataclass(frozen=True)
class ExternalUsage:
    """What pods outside this scheduler hold on a node: another scheduler's pods, DaemonSets, static
    pods. KAI charges every pod on a node to it, whichever scheduler placed it, and leaves what
    other schedulers' pods hold out of the fair-share capacity (its proportion plugin).

    ``gpus`` are whole devices; which ones is not known (the device plugin chose them), so the
    session takes that many devices our own tasks do not hold."""

    gpus: int = 0
    cpu_millis: float = 0.0
    memory_mib: float = 0.0
    pods: int = 0

    def __bool__(self) -> bool:
        return bool(self.gpus or self.cpu_millis or self.memory_mib or self.pods)


@dataclass
class Node:
    name: str
    gpus: int = 0
    gpu_memory_mib: float = 81920
    cpu_millis: float = 1_000_000
    memory_mib: float = 1_073_741_824
    pool: str = DEFAULT_POOL
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    max_pods: int = 110
    taints: list[Taint] = field(default_factory=list)
    # Held by pods this scheduler does not manage (never evicted, never moved).
    external: ExternalUsage = field(default_factory=ExternalUsage)

    def __post_init__(self) -> None:
        self.gpu_memory_mib = device_memory_mib(self.gpu_memory_mib)


# KAI reads a node's GPU memory label in MiB, but a value of 1 TiB-in-MiB or more is taken as bytes
# (a gpu-feature-discovery bug it works around), and it floors the result to a multiple of 100 MiB so
# that fractions of one device never come to the same byte count. A fraction + GPU-memory mix that
# exactly fills 81920 MiB therefore does not fit KAI's 81900; we read the label the same way.
_TIB_IN_MIB = 1024 * 1024
_DEVICE_MEMORY_STEP_MIB = 100


def device_memory_mib(label_value: float) -> float:
    """The memory of each GPU of a node, read from its label value as KAI's node_info reads it.

    Values under 100 MiB are kept as given: KAI would make them 0 and call the node's GPU memory
    invalid; the portal uses 1 MiB for "not synced yet" (no GPU-memory request fits such a node)."""
    mib = int(label_value)
    if mib >= _TIB_IN_MIB:
        mib //= 1024 * 1024
    if mib < _DEVICE_MEMORY_STEP_MIB:
        return label_value
    return float(mib - mib % _DEVICE_MEMORY_STEP_MIB)


@dataclass
class QueueResource:
    """Quota (deserved), limit and over-quota weight of one resource; -1 = unlimited."""

    quota: float = 0.0
    limit: float = UNLIMITED
    over_quota_weight: float = 1.0


@dataclass
class Queue:
    name: str
    parent: str | None = None
    priority: int = 100
    resources: dict[str, QueueResource] = field(default_factory=dict)
    reclaim_min_runtime_s: float | None = None
    preempt_min_runtime_s: float | None = None
    historical_usage: dict[str, float] = field(default_factory=dict)
    # Creation order (older first) breaks ties between queues.
    created_index: int = 0
    # The node pool (KAI scheduling shard) the queue belongs to; None = its parent's, and for a
    # top-level queue the default pool. Its quota and fair share apply in that pool only.
    pool: str | None = None
    # Pending tasks of the queue's jobs that the snapshot left out (a backlog past what one cycle
    # can consider), as (a task like theirs, how many): counted in the queue's request (fair
    # share), never placed.
    unlisted: list[tuple[Task, int]] = field(default_factory=list)

    def res(self, r: str) -> QueueResource:
        return self.resources.get(r) or QueueResource()


# Identity versus name. Every engine dict, result and reason ``Ref`` holds a job or task by its
# ``key``; its ``name`` is what it is called, and ties between equals are broken on the name, as
# KAI breaks them, so a key never changes a decision. The portal passes ``<namespace>/<queue>/<name>``
# (two jobs of one name in two queues are two jobs); a scenario file has no namespace, so an empty
# key is the name. The key is a string rather than a typed value: the engine only ever looks it
# up, never reads its parts, and a string hashes once (cached) where a tuple or dataclass would
# hash its fields at each of the hot loops' millions of lookups.


@dataclass
class Task:
    name: str
    job: str = ""  # the job's key
    gpu: float = 0.0
    gpu_memory_mib: float = 0.0
    cpu_millis: float = 0.0
    memory_mib: float = 0.0
    state: TaskState = TaskState.PENDING
    node: str | None = None
    # Devices a Running/Releasing task sits on (optional for whole GPUs).
    gpu_devices: tuple[int, ...] = ()
    # The job's sub-group this pod belongs to (Job.subgroups); None = none.
    subgroup: str | None = None
    # Devices a fractional task spreads over, each with ``gpu`` (or ``gpu_memory_mib``) of it:
    # KAI's gpu-fraction-num-devices (e.g. 2 x 0.5). Ignored for whole GPUs.
    gpu_fraction_devices: int = 1
    # Unique among the snapshot's tasks (see above); empty = ``name``.
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = self.name

    @property
    def is_fractional(self) -> bool:
        """Shares a device: a fraction (0 < gpu < 1) or a GPU-memory request."""
        return 0 < self.gpu < 1 or (self.gpu == 0 and self.gpu_memory_mib > 0)

    @property
    def fraction_device_count(self) -> int:
        """Devices a fractional task takes (1 unless gpu-fraction-num-devices says more)."""
        return max(1, self.gpu_fraction_devices) if self.is_fractional else 1

    @property
    def whole_gpus(self) -> int:
        return int(self.gpu) if self.gpu >= 1 else 0

    @property
    def needs_gpu(self) -> bool:
        return self.gpu > 0 or self.gpu_memory_mib > 0


@dataclass(frozen=True)
class SubGroup:
    """A sub-group of a job's pods (KAI's hierarchical pod groups: leader + workers, prefill +
    decode). A leaf sub-group holds pods and needs ``min_available`` of them active; a sub-group
    that other sub-groups name as ``parent`` holds no pods and needs ``min_subgroups`` of its
    direct children satisfied (default: all). The job runs only when every top-level sub-group
    is satisfied."""

    name: str
    min_available: int = 0
    parent: str | None = None
    min_subgroups: int | None = None


@dataclass
class TopologyConstraint:
    """Node-label keys: all tasks in one value of ``required``; try one of ``preferred``."""

    required: str | None = None
    preferred: str | None = None
    # Name of the topology (KAI's Topology object) for messages; None = the required key.
    name: str | None = None
    # The topology's levels, node-label keys from the broadest to the narrowest (e.g. zone,
    # block, rack, kubernetes.io/hostname). With levels, a job falls back from the preferred
    # level upward through every level up to the required one (or the whole cluster); without,
    # only ``preferred`` then ``required`` are tried.
    levels: tuple[str, ...] = ()


@dataclass
class Job:
    name: str
    queue: str
    priority: int = 50
    preemptible: bool | None = None
    min_available: int | None = None
    created_s: float = 0.0
    # Breaks ties between jobs of one age (Kubernetes timestamps have whole seconds), before the
    # name: KAI's job order compares PodGroup names (its PodGroupInfo.UID). Empty: the name decides.
    arrival_tiebreak: str = ""
    last_start_s: float | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    topology: TopologyConstraint | None = None
    tasks: list[Task] = field(default_factory=list)
    namespace: str = "default"
    pool: str = DEFAULT_POOL
    # Seconds the job has been stale (a running gang below its minimum); None = not recorded.
    stale_s: float | None = None
    # Grace before a stale gang is evicted; None = Config.staleness_grace_period_s, negative = never.
    staleness_grace_period_s: float | None = None
    # Minimum pending time before this job may cause evictions (kai-semantics.md §5.5).
    preemption_delay_s: float | None = None
    # Seconds since this job last had pods evicted; None = never.
    last_eviction_s: float | None = None
    # Placement rules of the job's pods (Kubernetes semantics, scheduler/rules.py).
    tolerations: list[Toleration] = field(default_factory=list)
    # Required node affinity: a node must match every expression of at least one term.
    node_affinity: list[tuple[MatchExpression, ...]] = field(default_factory=list)
    preferred_node_affinity: list[PreferredTerm] = field(default_factory=list)
    # Required pod anti-affinity among the job's own pods: at most one per value of this node label.
    anti_affinity_key: str | None = None
    # Preferred affinity to the job's own pods: nodes whose value of this label already holds one
    # of them gain ``affinity_weight``.
    affinity_key: str | None = None
    affinity_weight: int = 0
    # Sub-groups with their own minimum; tasks name theirs in ``Task.subgroup``.
    subgroups: list[SubGroup] = field(default_factory=list)
    # Pending tasks like the job's last one that the snapshot does not list: more than one cycle
    # could place (a large backlog, e.g. 10,000 tasks on 8 GPUs). They count in the queue's
    # request (fair share) and are never placed; the listed pending tasks must already include
    # every task the cycle could place plus one, so the decisions are those of the whole job.
    more_pending: int = 0
    # Unique among the snapshot's jobs (see above ``Task``); empty = ``name``.
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = self.name
        # A node selector on the pool label names the shard the job asks for; the cycle checks it
        # against the shard of the job's queue (``pools.assign_pools``).
        if self.pool == DEFAULT_POOL and POOL_LABEL in self.node_selector:
            self.pool = self.node_selector[POOL_LABEL]

    @property
    def is_preemptible(self) -> bool:
        # KAI: an explicit value wins, otherwise priority < 100 means preemptible.
        return self.preemptible if self.preemptible is not None else self.priority < 100

    @property
    def has_rules(self) -> bool:
        """Whether the job has placement rules beyond an equality node selector."""
        return bool(
            self.tolerations
            or self.node_affinity
            or self.preferred_node_affinity
            or self.anti_affinity_key
            or self.affinity_key
        )

    @property
    def has_preferences(self) -> bool:
        """Whether node scores depend on the job's own rules (preferred affinities)."""
        return bool(self.preferred_node_affinity or (self.affinity_key and self.affinity_weight))

    @property
    def gang_min(self) -> int:
        """The job's own minimum; with sub-groups and none set, the sum of their minimums plus
        every pod outside a sub-group."""
        if self.min_available is not None:
            return self.min_available
        if self.subgroups:
            kids: dict[str | None, list[SubGroup]] = {}
            for g in self.subgroups:
                kids.setdefault(g.parent, []).append(g)

            def least(g: SubGroup) -> int:
                """Fewest pods that satisfy ``g``: a leaf's minimum, or a set's cheapest children."""
                children = kids.get(g.name)
                if not children:
                    return g.min_available
                need = len(children) if g.min_subgroups is None else min(g.min_subgroups, len(children))
                return sum(sorted(least(c) for c in children)[:need])

            named = {g.name for g in self.subgroups}
            return sum(least(g) for g in kids.get(None, [])) + sum(
                1 for t in self.tasks if t.subgroup not in named
            )
        return len(self.tasks)


@dataclass
class Config:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    rounds: int = 1
    placement: str = "binpack"
    now: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    usage_window_hours: float | None = None
    usage_half_life_hours: float | None = None
    usage_k: float | None = None
    # Scheduler default grace period of a stale gang (§3.10); negative = never evict.
    staleness_grace_period_s: float = 60.0
    # Consolidation looks at no more than this many victim jobs (KAI default 16).
    max_consolidation_preemptees: int = 16
    # Work budget of each eviction action's victim search, in units of reading one job or node
    # (placing or ordering one task costs 50; see ``actions/solvers/budget.py: spend``); when
    # spent, the action ends.
    # Work, not time, so that a slow machine decides as a fast one does. 0 = no work budget: the
    # action stops at the wall-clock limit only, as KAI's does (docs/kai-agreement.md).
    action_work_budget: int = 3_000_000
    # Wall-clock limit of each eviction action: a fault stop only (reported in the cycle's
    # ``actions_out_of_time``); the work budget ends a search long before it. KAI's default
    # action search limit (maxActionSearchDuration) is 5 minutes.
    action_time_budget_s: float = 300.0
    # KAI's node-local scenario generator runs for a one-task step whose victim stream has at most
    # this many contributions; longer streams go straight to the logarithmic prefix search (KAI's
    # generator simulates once per prefix and node: the 5,000-node mixed stress workload does not
    # finish in 240 s without the cap). None = every stream, as KAI does (docs/kai-agreement.md).
    node_local_max_stream: int | None = 64
    # KAI quirk, default on (docs/kai-agreement.md, "KAI quirks"): consolidation's allocatable-GPU
    # check reads KAI's own node GPU counters as its statements leave them, the drift a discarded
    # probe leaves on a node included (``scheduler/gpu_ledger.py``). False: the sum of the devices.
    kai_gpu_counter_drift: bool = True
    # Reclaim ordering check multiplier (>= 1; larger = more conservative).
    reclaimer_saturation_multiplier: float = 1.0
    # Per node pool overrides of ``reclaimer_saturation_multiplier`` (KAI sets it per shard).
    pool_saturation_multiplier: dict[str, float] = field(default_factory=dict)
    # Placement strategy of GPU tasks and of CPU-only tasks (KAI's placementStrategy.gpu / .cpu);
    # None = ``placement``.
    gpu_placement: str | None = None
    cpu_placement: str | None = None
    # The workload's request shapes for the ``fragmentation`` strategy, as (gpu, cpu_millis,
    # memory_mib, weight); None = the session's own tasks (scheduler/fragmentation.py).
    fragmentation_requests: tuple[tuple[float, float, float, float], ...] | None = None

    def strategy(self, needs_gpu: bool) -> str:
        """binpack, spread or fragmentation (``PLACEMENTS``) for a task that needs a GPU (whole,
        fraction, memory) or not."""
        chosen = self.gpu_placement if needs_gpu else self.cpu_placement
        return chosen or self.placement

    @property
    def gpu_sharing_order(self) -> bool:
        """Whether nodes with a used shared GPU group the task fits on score above the others,
        for every task (CPU-only ones included): KAI's operator enables its gpusharingorder plugin
        by the GPU strategy alone (pkg/apis/kai/v1/schedulingshard_types.go, setDefaultPlugins:
        on iff placementStrategy.gpu is binpack), and the plugin's nodeOrderFn
        (pkg/scheduler/plugins/gpusharingorder) scores every task whatever the CPU strategy.
        ``fragmentation`` is ours (a packing strategy): it keeps the bonus as binpack does."""
        return self.strategy(True) != "spread"

    @property
    def any_spread(self) -> bool:
        return "spread" in (self.strategy(True), self.strategy(False))

    def saturation_multiplier(self, pool: str) -> float:
        return self.pool_saturation_multiplier.get(pool, self.reclaimer_saturation_multiplier)

    @property
    def usage_enabled(self) -> bool:
        return self.usage_window_hours is not None or self.usage_k is not None


@dataclass
class Snapshot:
    """The cluster at the start of a cycle."""

    nodes: list[Node]
    queues: list[Queue]
    jobs: list[Job] = field(default_factory=list)


def round_gpu(x: float) -> float:
    """GPU amounts are fixed point with 2 decimals (avoids 0.1+0.2 drift)."""
    y = x + 0.0
    return y if y % 1.0 == 0.0 else round(y, 2)  # a whole amount is already rounded (clean())


def clean(x: float) -> float:
    """Round away float noise from sums of fractional amounts.

    A whole amount is returned as is: ``round`` would give it back unchanged, and it is the
    costliest call of the engine's arithmetic (``x % 1.0`` is exact for every float)."""
    return x if x % 1.0 == 0.0 else round(x, 6)
