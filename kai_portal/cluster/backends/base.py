"""The cluster-backend interface and the plain data it trades in.

The scheduling loop talks to a cluster only through `ClusterBackend`: it
observes nodes and pods, hands over a cycle's decisions (binds, evictions,
events), and creates or deletes portal-submitted jobs. Everything here is
plain Python so the loop can convert it with its own adapter; no Django, no
Kubernetes client objects.

What a backend can do beyond that is declared, never probed for: its
``capabilities`` (a frozen value every backend has) and the small optional
interfaces below (``NamespaceManager``, ``QueueObjectStore``, ``LeaseHolder``),
which callers check with ``isinstance``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable


class TaskStatus(enum.StrEnum):
    """A pod's status as KAI derives it (kai-semantics.md §1.3).

    Allocated, Pipelined and Binding exist only inside a cycle, and
    StuckInReleasing needs the clock; the loop derives those itself from
    `ObservedPod.deletion_timestamp`.
    """

    PENDING = "Pending"
    GATED = "Gated"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class NodeTaint:
    """A node taint (spec.taints): NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class ObservedNode:
    """One node as the scheduler needs it."""

    name: str
    pool: str | None
    labels: dict[str, str]
    unschedulable: bool  # spec.unschedulable (cordoned)
    ready: bool  # condition Ready == True
    # Conditions that make a node unschedulable besides NotReady
    # (MemoryPressure, DiskPressure, PIDPressure, NetworkUnavailable) when True.
    pressure_conditions: tuple[str, ...]
    gpu_count: int  # allocatable nvidia.com/gpu
    gpu_product: str | None  # label nvidia.com/gpu.product
    # Per-device memory from label nvidia.com/gpu.memory, rounded down to 100 MiB;
    # None means "not synced": no gpu-memory request may land on this node.
    gpu_memory_mib: int | None
    cpu_millis: int
    memory_mib: int
    max_pods: int
    resource_version: str | None = None
    taints: tuple[NodeTaint, ...] = ()

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable and not self.pressure_conditions


@dataclass(frozen=True)
class GpuRequest:
    """What a pod asks of GPUs (kai-semantics.md §1.7 and §6).

    `whole` comes from container limits; `fraction` and `memory_mib` from the
    `gpu-fraction` / `gpu-memory` annotations. When both of those are set the
    fraction wins; the engine applies that rule, this is the raw request.
    """

    whole: int = 0
    fraction: float | None = None
    memory_mib: int | None = None
    num_devices: int = 1

    @property
    def shared(self) -> bool:
        return self.fraction is not None or self.memory_mib is not None


@dataclass(frozen=True)
class JobRef:
    """Which job (pod group) a pod belongs to.

    `kind` is "PodGroup" for the `pod-group-name` annotation, the owner's kind
    for an owner reference, or "Pod" for a pod that stands alone.
    """

    namespace: str
    kind: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True)
class AppRequests:
    """What a pod's app containers request (``spec.containers`` only: no init containers, no
    overhead), as KAI's podgroup controller sums a PodGroup's and a Queue's resources."""

    cpu_millis: int
    memory_bytes: int
    gpus: int  # whole nvidia.com/gpu


@dataclass(frozen=True)
class ObservedPod:
    """One pod with schedulerName ours, parsed into scheduling terms."""

    namespace: str
    name: str
    uid: str
    node: str | None
    phase: str
    status: TaskStatus
    queue: str | None  # None: no queue label; the loop applies the default queue
    job: JobRef
    priority_class: str | None
    preemptibility: str | None  # "preemptible", "non-preemptible" or None
    gpu: GpuRequest
    cpu_millis: int
    memory_mib: int
    created_at: datetime | None
    deletion_timestamp: datetime | None
    gpu_devices: tuple[int, ...]  # devices we chose at bind time (our annotation)
    labels: dict[str, str]
    annotations: dict[str, str]
    resource_version: str | None = None
    # Placement rules, in Kubernetes' shape as the portal stores them (``Job.node_selector``,
    # ``tolerations``, ``node_affinity``): plain JSON, so the loop keeps them without converting.
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    node_affinity: dict[str, list[object]] = field(default_factory=dict)
    # The pod group's gang minimum from its owner or PodGroup (None: the pods' own annotation, else 1)
    min_member: int | None = None
    # The numeric priority of priority_class in this cluster (None: the portal's built-in value)
    priority: int | None = None
    # When the pod's group began, as KAI's job order reads it (its PodGroup's creation time): the
    # creationTimestamp of the object the group is named for (the top owner; the PodGroup a pod
    # names, when earlier). None: the pod's own ``created_at`` stands in.
    job_created_at: datetime | None = None
    # The name of the pod's PodGroup (the one it names, else the one KAI's podgrouper would write):
    # KAI's job order breaks ties of creation time on it. Empty: unknown (the job's name decides).
    pod_group_name: str = ""
    # Memory requested in bytes (``memory_mib`` is rounded up to whole MiB) and whether its
    # quantity is written in binary units ("256Mi"; "250M" is decimal): the PodGroup and Queue
    # sums are written in the unit KAI's controllers print them in (resource.Quantity).
    memory_bytes: int = 0
    memory_binary: bool = False
    # The app containers' own requests, for the PodGroup and Queue sums (None: the pod's
    # effective request above stands in).
    app_requests: AppRequests | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class ForeignPod:
    """A pod another scheduler placed (or a DaemonSet's, a static pod): only what it holds.

    KAI charges every pod on a node to the node, whichever scheduler placed it. Such pods are
    never bound, evicted or given events; only their node and requests are kept."""

    namespace: str
    name: str
    node: str
    gpus: int  # whole nvidia.com/gpu
    cpu_millis: int
    memory_mib: int


@dataclass(frozen=True)
class NodeUsage:
    """The sum of what foreign pods hold on one node."""

    gpus: int = 0
    cpu_millis: int = 0
    memory_mib: int = 0
    pods: int = 0

    def plus(self, pod: ForeignPod) -> NodeUsage:
        return NodeUsage(
            self.gpus + pod.gpus,
            self.cpu_millis + pod.cpu_millis,
            self.memory_mib + pod.memory_mib,
            self.pods + 1,
        )


@dataclass(frozen=True)
class ClusterState:
    """What one observe() saw. The dicts are copies: the caller may keep them."""

    nodes: dict[str, ObservedNode]
    pods: dict[tuple[str, str], ObservedPod]
    node_resource_version: str | None = None
    pod_resource_version: str | None = None
    # Node name -> what pods we do not schedule hold there (nodes without any are left out).
    external: dict[str, NodeUsage] = field(default_factory=dict)
    # One node pool's share of the cluster (shards, kubernetes/pool_scope.py): every node name and
    # job key the cluster has, so a pool's sync tells "gone from the cluster" from "another pool's".
    # None: ``nodes`` and ``pods`` are the whole cluster.
    cluster_nodes: frozenset[str] | None = None
    cluster_jobs: frozenset[str] | None = None


@dataclass(frozen=True)
class Bind:
    """Place a pending pod on a node, on the given GPU devices."""

    namespace: str
    pod: str
    node: str
    gpu_devices: list[int] = field(default_factory=list)
    gpu_fraction: float | None = None  # per device, for shared-GPU pods
    pool: str | None = None  # for the Scheduled message; the node's pool when None


@dataclass(frozen=True)
class Evict:
    """Evict a running pod, with the message KAI would write (§8)."""

    namespace: str
    pod: str
    message: str
    action: str = "preempt"  # preempt, reclaim, consolidation, stale-gang
    evictor_namespace: str | None = None
    evictor_job: str | None = None
    grace_period_seconds: int | None = None


class EventType(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class PodEvent:
    """A Kubernetes Event about a pod or a pod group (reasons as in §8)."""

    namespace: str
    name: str
    type: EventType
    reason: str  # Unschedulable, Scheduled, Pipelined, Evict, FailedBinding, NotReady...
    message: str
    kind: str = "Pod"  # or "PodGroup"
    uid: str | None = None
    # A pending pod's PodScheduled=False reason: Unschedulable when it waits for room on a node
    # (cluster autoscalers and Karpenter add nodes for exactly that reason), or the engine's
    # quota code (OverLimit, NonPreemptibleOverQuota) when only its queue holds it back.
    condition_reason: str = "Unschedulable"


@dataclass(frozen=True)
class OperationResult:
    """The outcome of one write to the cluster."""

    operation: str  # bind, evict, event, submit, cancel
    namespace: str
    name: str
    ok: bool
    error: str | None = None
    status_code: int | None = None  # HTTP status when the API answered


@dataclass
class ApplyReport:
    """Per-operation outcomes, so the loop can record failures and retry them."""

    results: list[OperationResult] = field(default_factory=list)

    def add(self, result: OperationResult) -> None:
        self.results.append(result)

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    @property
    def failures(self) -> list[OperationResult]:
        return [result for result in self.results if not result.ok]

    def of(self, operation: str) -> list[OperationResult]:
        return [result for result in self.results if result.operation == operation]


@dataclass(frozen=True)
class PodSpecRequest:
    """A job submitted in the portal: `num_tasks` identical pods in one pod group."""

    namespace: str
    job_name: str
    queue: str
    image: str
    num_tasks: int = 1
    command: list[str] = field(default_factory=list)
    gpus: int = 0  # whole GPUs per pod
    gpu_fraction: float | None = None  # instead of whole GPUs
    gpu_memory_mib: int | None = None
    gpu_devices_per_pod: int = 1  # gpu-fraction-num-devices
    cpu_millis: int = 0
    memory_mib: int = 0
    priority_class: str | None = None
    preemptibility: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    job_uid: str = ""  # the portal job's uid, a label on every pod (cancel and sync find them by it)
    min_member: int | None = None  # the gang minimum, as kai.scheduler/batch-min-member
    # A user's manifest: the pod template's labels, annotations and spec (plain dicts). When
    # set, the pods are this spec (containers, env, tolerations, nodeSelector...), not one
    # synthesized from the fields above; the backend only adds its scheduler name and labels.
    pod_template: PodTemplate | None = None
    # The team's pod security level (workloads/pod_policy.py): a pod the portal builds (no template)
    # at "restricted" carries that standard's security context.
    pod_security: str = "baseline"


@dataclass(frozen=True)
class PodTemplate:
    """The pod part of a user's Pod or batch/v1 Job manifest, as the user wrote it."""

    spec: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    """What a backend declares about itself; the cycle reads this instead of probing for attributes."""

    # The portal's own rows are the cluster (the simulated backend): the cycle copies no observed
    # state into them and reads no Queue objects; the rows already say it all.
    rows_are_the_cluster: bool = False


@dataclass(frozen=True)
class LeaseConfig:
    """One leader-election Lease and its timings (cluster/leader_election.py)."""

    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0  # seconds another candidate waits after the last change it saw
    renew_deadline: float = 10.0  # seconds the holder keeps leading without a successful renewal
    retry_period: float = 2.0  # seconds between renewals while a cycle runs

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs retry period < renew deadline < lease duration "
                f"(got {self.retry_period:g} s, {self.renew_deadline:g} s, {self.lease_duration:g} s): a "
                "holder must stop binding before another replica may take the lease"
            )


class ClusterBackend(Protocol):
    """The one small interface every cluster backend implements."""

    @property
    def capabilities(self) -> Capabilities:
        """What this backend declares about itself."""
        ...

    def observe(self) -> ClusterState:
        """Return the current nodes and our pods."""
        ...

    def apply(self, binds: list[Bind], evictions: list[Evict], events: list[PodEvent]) -> ApplyReport:
        """Carry out a cycle's decisions; never raises for a single failed operation."""
        ...

    def submit(self, request: PodSpecRequest) -> ApplyReport:
        """Create the pods of a portal job."""
        ...

    def cancel(self, namespace: str, job: str, uid: str = "") -> ApplyReport:
        """Delete the pods of a portal job (those labelled with its uid when given)."""
        ...


@runtime_checkable
class NamespaceManager(Protocol):
    """A backend that can make and label the namespaces portal jobs run in (Kubernetes)."""

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> OperationResult:
        """Create the namespace with ``labels``; one that already exists is fine."""
        ...

    def label_namespace(self, name: str, labels: dict[str, str]) -> OperationResult:
        """Set ``labels`` on the namespace (404 when it is not there yet)."""
        ...


class QueueObjectReader(Protocol):
    """The cluster's KAI Queue objects as the cycle reads them."""

    def observe(self) -> dict[str, dict[str, Any]] | None:
        """Every Queue object by name, or None when they cannot be read (unknown, never empty)."""
        ...


@runtime_checkable
class QueueObjectStore(Protocol):
    """A backend whose cluster holds KAI ``Queue`` objects (cluster/queue_sync.py reads them each cycle)."""

    @property
    def queue_objects(self) -> QueueObjectReader:
        """The backend's Queue objects, read through its own list/watch cache."""
        ...


class Elector(Protocol):
    """One candidate for a leader-election lease."""

    @property
    def config(self) -> LeaseConfig: ...

    def try_acquire_or_renew(self) -> bool:
        """One round of acquiring or renewing; True when this candidate holds the lease afterwards."""
        ...

    def refusal(self) -> str | None:
        """None while this candidate leads; else why it must not write to the cluster."""
        ...

    def live_holder(self) -> str | None:
        """Who else holds the lease now, by the rule a candidate waits on before taking it over
        (None: nobody, or it expired); reads only. Fails closed: a lease it cannot read is held."""
        ...


@runtime_checkable
class LeaseHolder(Protocol):
    """A backend whose cycle writes only the holder of a lease may make (cluster/leader_election.py)."""

    # The candidate this backend's cycles use: made on first use from the settings, or given (tests).
    elector: Elector | None

    @property
    def scheduler_name(self) -> str:
        """The scheduler name, which names the default lease."""
        ...

    def new_elector(self, config: LeaseConfig) -> Elector:
        """A candidate for the lease ``config`` names, over this backend's API."""
        ...

    def guard_writes(self, guard: Callable[[], str | None] | None) -> None:
        """Check ``guard`` before each write of a cycle: a non-None answer refuses the write."""
        ...


@runtime_checkable
class ChangeFeed(Protocol):
    """A backend that can follow its cluster in the background (issue 29: the Kubernetes backend's
    informers) and say when something changed that a cycle should act on: the scheduler process
    (``manage.py run_scheduler``) starts a cycle on each change instead of only every CYCLE_SECONDS."""

    def start_watches(self, on_change: Callable[[str], None]) -> None:
        """Keep the watches open from now on; call ``on_change`` (from their threads) with a few
        words saying what changed. ``observe`` then reads what they applied, opening no watch."""
        ...

    def stop_watches(self) -> None:
        """Stop the watches (their threads end after their current event)."""
        ...
