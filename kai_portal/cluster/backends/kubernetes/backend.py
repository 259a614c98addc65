"""The Kubernetes cluster backend, on the official `kubernetes` client: the components composed.

In KAI's shape (pkg/scheduler/cache, pkg/binder, pkg/podgrouper, status_updater, evictor):

- observe: ``cache.ClusterCache`` (list once, then watch; pods grouped by ``owners`` and ``pod_grouping``);
- bind: ``binder.Binder`` (POST pods/<pod>/binding, GPU devices as Binding annotations; shared
  GPUs through ``gpu_sharing``);
- evict: ``evictor.Evictor`` (the Eviction API, then KAI's DisruptionTarget condition);
- pod conditions and events: ``status.StatusUpdater`` (PodScheduled=False, aggregated and
  rate-limited Events);
- the portal's jobs and their namespaces: ``portal_jobs.PortalJobs``;
- KAI Queue objects: ``queue_objects.QueueObjects``; the leader-election Lease: ``lease``;
- what KAI's tooling reads (podgrouper, podgroup and queue controllers, the binder's Bound event):
  ``pod_groups.PodGroupWriter`` and ``queue_status.QueueStatusWriter``, after the binds.

Writes, each caught on its own so one bad pod never stops the others, all go through one
``client.Caller``, which refuses a cycle's writes once this replica has lost the lease.

Shards (``scope_to_pool``, as KAI's per-``SchedulingShard`` scheduler): the backend observes one
node pool's share (pool_scope.py), refuses binds and evictions on any other pool's node, writes
the PodGroups of its share and the status of its pool's queues only, and collects reservation
pods on its pool's nodes only. Its Lease is the pool's own (cluster/leader_election.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kubernetes import client

from ..base import (
    ApplyReport,
    Bind,
    Capabilities,
    ClusterState,
    Elector,
    Evict,
    LeaseConfig,
    OperationResult,
    PodEvent,
    PodSpecRequest,
)
from .binder import BIND_CONCURRENCY, Binder
from .cache import ClusterCache
from .client import Caller, HotWrites, Lister, load_api_client
from .evictor import Evictor, evict_event, evictor_annotations
from .gpu_sharing import GpuSharing
from .lease import LeaderElector
from .owners import OwnerCache
from .pod_groups import PodGroupWriter
from .pool_scope import PoolScope
from .portal_jobs import PortalJobs
from .queue_objects import QueueObjects
from .queue_status import QueueStatusWriter
from .status import StatusUpdater


class KubernetesBackend:
    """A `ClusterBackend` over the Kubernetes API; also a NamespaceManager, QueueObjectStore and
    LeaseHolder (base.py)."""

    capabilities = Capabilities(rows_are_the_cluster=False)

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        scheduler_name: str = "kai-scheduler",
        # KAI's default (constants.DefaultQueueLabel); the legacy runai/queue only when configured.
        queue_label_keys: Sequence[str] = ("kai.scheduler/queue",),
        pool_label: str = "kai.scheduler/node-pool",
        namespace: str = "default",
        watch_timeout_seconds: int = 1,
        gpu_sharing: GpuSharing | None = None,
        owner_read_threads: int = 8,
        bind_concurrency: int = BIND_CONCURRENCY,
    ) -> None:
        self.api_client = api_client or load_api_client()
        # Binds in flight at once (apply): at most the client's connection pool, which holds
        # cpu_count * 5 connections unless the configuration says otherwise.
        pool_size = getattr(self.api_client.configuration, "connection_pool_maxsize", None) or 1
        self.bind_concurrency = max(1, min(bind_concurrency, pool_size))
        self.core = client.CoreV1Api(self.api_client)
        self._scheduler_name = scheduler_name
        self.queue_label_keys = tuple(queue_label_keys)
        self.namespace = namespace
        self.pool_label = pool_label
        self.scope: PoolScope | None = None  # one node pool's scheduler (scope_to_pool); None: all
        self.lister = Lister(watch_timeout_seconds)
        self.caller = Caller()
        self.owners = OwnerCache(self.core, owner_read_threads)
        self.cache = ClusterCache(
            self.core, self.lister, self.owners, scheduler_name, self.queue_label_keys, pool_label
        )
        # Shared GPUs: reservation pods and the pods' ConfigMaps (gpu_sharing.py).
        sharing = gpu_sharing or GpuSharing(self.core, scheduler_name=scheduler_name)
        # The writes made per pod of a cycle (bind, Events, pod conditions): client.HotWrites.
        self.writes = HotWrites(self.api_client)
        self.binder = Binder(self.core, self.caller, self.cache, sharing, self.bind_concurrency, self.writes)
        self.evictor = Evictor(self.core, self.caller, self.cache)
        self.status = StatusUpdater(
            self.core, self.caller, self.cache, scheduler_name, self.bind_concurrency, self.writes
        )
        self.jobs = PortalJobs(self.core, self.caller, self.lister, scheduler_name, self.queue_label_keys)
        self._queue_objects = QueueObjects(self.api_client, self.lister)
        # The objects KAI's tooling reads: PodGroups (podgrouper, podgroup controller) and Queue.status.
        custom = client.CustomObjectsApi(self.api_client)
        self.pod_groups = PodGroupWriter(custom, self.core, self.caller, self.cache, self.bind_concurrency)
        self.queue_status = QueueStatusWriter(custom, self.caller, self.bind_concurrency)
        # Leader election (cluster/leader_election.py): this backend's candidate, made on first use.
        self.elector: Elector | None = None
        self._watch_client: client.ApiClient | None = None  # the background watches' (start_watches)

    @property
    def scheduler_name(self) -> str:
        return self._scheduler_name

    @property
    def pool(self) -> str | None:
        """The node pool this backend schedules (shards), else None: the whole cluster."""
        return self.scope.pool if self.scope is not None else None

    def scope_to_pool(self, pool: str, queue_pools: Mapping[str, str] | None = None) -> None:
        """Observe and write only node pool ``pool``'s share from now on (pool_scope.py);
        ``queue_pools`` (queue name -> pool, the portal's rows) places pods by their queue."""
        if self.scope is not None and self.scope.pool != pool:
            raise ValueError(
                f"this backend schedules node pool {self.scope.pool!r}; pool {pool!r} needs its own "
                "(its own watches and Lease)"
            )
        if self.scope is None:
            self.scope = PoolScope(pool, self.pool_label)
        if queue_pools is not None:
            self.scope.queue_pools = dict(queue_pools)

    @property
    def gpu_sharing(self) -> GpuSharing:
        return self.binder.gpu_sharing

    @gpu_sharing.setter
    def gpu_sharing(self, sharing: GpuSharing) -> None:
        """Shared GPUs as configured (configured_backend.py), over this backend's ``core``."""
        self.binder.gpu_sharing = sharing

    @property
    def queue_objects(self) -> QueueObjects:
        return self._queue_objects

    # ----- observe -------------------------------------------------------

    def start_watches(self, on_change: Callable[[str], None]) -> None:
        """Nodes, pods, PodGroups, PriorityClasses and Queue objects followed by informers in
        background threads (ChangeFeed); ``observe`` then reads them without waiting on a watch."""
        if self._watch_client is None:
            # A pool of their own: an open watch holds its connection (cache.start_watches).
            self._watch_client = client.ApiClient(self.api_client.configuration)
        self.cache.start_watches(on_change, self._watch_client)
        self._queue_objects.start_watch(on_change, self._watch_client)

    def stop_watches(self) -> None:
        """Stop the informers, wait for their threads, and close the watches' connections."""
        informers = [*self.cache.stop_watches(), self._queue_objects.informer]
        for informer in informers:
            if informer is not None:
                informer.stop()
        for informer in informers:
            if informer is not None:
                informer.join(10)
        if self._watch_client is not None:
            self._watch_client.close()
            self._watch_client = None

    def observe(self) -> ClusterState:
        """Return nodes, our pods and what other pods hold: what the background watches applied
        (start_watches), else a list once and then short watch windows each call."""
        self.cache.refresh()
        self.binder.with_own_binds(self.cache.pods)
        state = self.cache.state()
        if self.scope is None:
            return state
        share = self.scope.share(state)
        self.pod_groups.owns = set(share.pods)
        return share

    # ----- apply ---------------------------------------------------------

    def apply(self, binds: list[Bind], evictions: list[Evict], events: list[PodEvent]) -> ApplyReport:
        """Bind, evict and record events; every failure is reported, none raised.

        Binds go first, all of them, so a pod is bound without waiting for any event; then the
        evictions (each with its Evict event); then the binds' Scheduled / FailedBinding events, the
        cycle's own events and the pending pods' PodScheduled conditions, side by side on the same
        bounded pool (kube-scheduler's events are asynchronous too: they never hold a bind up)."""
        report = ApplyReport()
        if self.scope is not None:
            binds, evictions = self._in_pool(binds, evictions, report)
        on_nodes = None if self.scope is None else self._pool_node
        for result in self.gpu_sharing.start_cycle(self.cache.pods.values(), on_nodes):
            report.add(result)
        bound = self.binder.bind_all(binds)
        for result in bound:
            report.add(result)
        for eviction in evictions:
            report.add(self.evictor.evict(eviction))
            if report.results[-1].ok:
                evicted = evict_event(eviction)
                report.add(self.status.post_event(evicted, annotations=evictor_annotations(eviction)))
        notes = [self.binder.bind_event(b, r) for b, r in zip(binds, bound, strict=True)]
        notes += [self.binder.bound_event(b) for b, r in zip(binds, bound, strict=True) if r.ok]
        for result in self.write_kai_objects(binds, bound, events):
            report.add(result)
        events = self.pod_groups.retarget(events)
        for result in self.status.note_all(
            notes + self.status.events_to_post(events, self.pod_groups.known())
        ):
            report.add(result)
        return report

    def _pool_node(self, node: str) -> bool:
        return self.scope is not None and self.scope.refuses_node(node, self.cache.nodes) is None

    def _in_pool(
        self, binds: list[Bind], evictions: list[Evict], report: ApplyReport
    ) -> tuple[list[Bind], list[Evict]]:
        """The binds and evictions on this pool's nodes; every other one is refused in ``report``,
        never sent (a pool's scheduler writes only its own pool, whatever asked it)."""
        assert self.scope is not None
        kept_binds, kept_evictions = [], []
        for bind in binds:
            why = self.scope.refuses_node(bind.node, self.cache.nodes)
            if why is None:
                kept_binds.append(bind)
            else:
                report.add(OperationResult("bind", bind.namespace, bind.pod, False, why))
        for eviction in evictions:
            cached = self.cache.pods.get((eviction.namespace, eviction.pod))
            node = cached.node if cached is not None else None
            why = self.scope.refuses_node(node, self.cache.nodes) if node else "the pod is on no node"
            if why is None:
                kept_evictions.append(eviction)
            else:
                report.add(OperationResult("evict", eviction.namespace, eviction.pod, False, why))
        return kept_binds, kept_evictions

    def write_kai_objects(
        self, binds: list[Bind], bound: list[OperationResult], events: list[PodEvent]
    ) -> list[OperationResult]:
        """PodGroups and Queue.status as KAI's podgrouper and controllers write them (after the
        binds, so a bind never waits for them; before the events, so a PodGroup's have it)."""
        results = self.pod_groups.write(binds, bound, events)
        groups = self.pod_groups.plans.values()
        queues = self._queue_objects.cached()
        if self.scope is not None:  # the pool's queues only: another pool's scheduler writes its own
            scope = self.scope
            queues = {name: obj for name, obj in queues.items() if scope.queue_pools.get(name) == scope.pool}
        return results + self.queue_status.write(queues, groups)

    # ----- submit / cancel / namespaces (NamespaceManager) -----------------

    def submit(self, request: PodSpecRequest) -> ApplyReport:
        """Create the job's pods; stops at the first refusal (portal_jobs.py)."""
        return self.jobs.submit(request)

    def cancel(self, namespace: str, job: str, uid: str = "") -> ApplyReport:
        """Delete every pod the portal created for the job (portal_jobs.py)."""
        return self.jobs.cancel(namespace, job, uid)

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> OperationResult:
        return self.jobs.create_namespace(name, labels)

    def label_namespace(self, name: str, labels: dict[str, str]) -> OperationResult:
        return self.jobs.label_namespace(name, labels)

    # ----- leader election (LeaseHolder) -----------------------------------

    def new_elector(self, config: LeaseConfig) -> LeaderElector:
        return LeaderElector(self.api_client, config)

    def guard_writes(self, guard: Callable[[], str | None] | None) -> None:
        self.caller.write_guard = guard
