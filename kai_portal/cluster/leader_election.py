"""Leader election on a Kubernetes ``Lease`` (coordination.k8s.io/v1): one portal replica binds.

The cycle lock (scheduling/lock.py) keeps cycles of one portal from overlapping while they share
Redis; it cannot stop two replicas that disagree about it (one reaches Redis, the other falls back
to its database lock; or two installs with their own Redis). So in kubernetes mode a cycle also
needs the Lease: only its holder observes-and-binds, the others record a skipped cycle saying who
holds it. The algorithm is client-go's ``leaderelection`` (the Lease client: backends/kubernetes/lease.py):

- The holder renews the Lease at the start of each cycle and every ``retry_period`` while the
  cycle runs (a heartbeat thread). Writes are updates with the read resourceVersion, so two
  candidates never both win one round.
- Another candidate takes the Lease only after it has seen the same record unchanged for
  ``lease_duration`` on its own monotonic clock (never comparing wall clocks across machines).
- Fail closed: the holder counts itself leader only until ``renew_deadline`` after the start of
  its last successful renewal, and ``renew_deadline < lease_duration``, so a holder that cannot
  renew (API unreachable, partitioned) stops binding before anyone else may take over. The
  backend checks ``refusal()`` before each bind, eviction, event and pod condition it writes.

A backend takes part when it is a ``LeaseHolder`` (backends/base.py); its elector lives on it.

Shards (``SCHEDULING_SHARDS``, as KAI's per-``SchedulingShard`` schedulers): a backend scoped to
one node pool (``backend.pool``) runs for that pool's Lease, ``<lease name>-<pool>`` (KAI's is
``<scheduler name>-<partition value>``), so pools' schedulers lead side by side. A pool's Lease
does not exclude a whole-cluster scheduler (a replica without shards, say mid-rollout), which
would bind the same pods: before it takes or renews its Lease, a pool's cycle reads the whole
cluster's and is skipped, saying so, while another replica holds it; a whole-cluster cycle that
does not lead yet is skipped while any known pool's Lease is held (``_other_schedulers``).

Between cycles nobody renews: with the default 5 s cycles and a 15 s lease the holder keeps it;
with cycles slower than the lease, leadership may move between replicas, never overlap.

Identity: ``LEADER_ELECTION_IDENTITY``, else the host name, which in a pod is the pod's name: the
Celery processes of one worker pod are one replica (their cycles are serialized by the cycle lock
already), so they share the lease instead of skipping each other's cycles.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from kai_portal.cluster.backends import ClusterBackend, Elector, LeaseConfig, LeaseHolder
from kai_portal.nodes.models import NodePool

NAME_LIMIT = 253
_NOT_IN_A_NAME = re.compile(r"[^a-z0-9.-]")
# Observers of the Leases a backend does not run for (the whole cluster's, other pools'), by lease
# name: each remembers when it last saw the record change, on this clock. Kept while the backend lives.
_observers: weakref.WeakKeyDictionary[object, dict[str, Elector]] = weakref.WeakKeyDictionary()
_observers_guard = threading.Lock()


class _Renewer(threading.Thread):
    """Renews the lease every retry period while a cycle runs."""

    def __init__(self, elector: Elector) -> None:
        super().__init__(name="leader-lease-renewer", daemon=True)
        self.elector, self.stopped = elector, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.elector.config.retry_period):
            self.elector.try_acquire_or_renew()

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)


def elector_for(backend: ClusterBackend) -> Elector | None:
    """The backend's elector: one per lease-holding backend when ``LEADER_ELECTION`` is on, else None.

    Made on first use from the settings and kept on the backend (tests give a backend their own)."""
    if not isinstance(backend, LeaseHolder) or not settings.LEADER_ELECTION:
        return None
    if backend.elector is None:
        backend.elector = backend.new_elector(_config(lease_name(backend.scheduler_name, _pool(backend))))
    return backend.elector


def lease_name(scheduler_name: str, pool: str | None = None) -> str:
    """The Lease of the whole cluster's scheduler (``pool`` None) or of one node pool's.

    One lease per scheduler name: portals scheduling different pods do not exclude each other.
    A pool's name is a label value (it may hold ``_`` and capitals, which a Lease name may not):
    it is lowered and such characters become ``-``, with a digest of the pool's own name added
    when that changed it, so two pools never share a Lease."""
    base = settings.LEADER_ELECTION_LEASE_NAME or f"kai-portal-{scheduler_name}"
    if pool is None:
        return base[:NAME_LIMIT]
    part = _NOT_IN_A_NAME.sub("-", pool.lower()).strip("-.")
    if part != pool:
        part = f"{part}-{hashlib.sha256(pool.encode()).hexdigest()[:8]}".strip("-")
    return f"{base[: NAME_LIMIT - len(part) - 1]}-{part}"


def _pool(backend: object) -> str | None:
    """The node pool a backend schedules (a shard's), else None (the whole cluster)."""
    pool = getattr(backend, "pool", None)  # KubernetesBackend.scope_to_pool; absent on test doubles
    return pool if isinstance(pool, str) else None


def _config(name: str, identity: str | None = None) -> LeaseConfig:
    return LeaseConfig(
        namespace=settings.LEADER_ELECTION_NAMESPACE,
        name=name,
        identity=identity or settings.LEADER_ELECTION_IDENTITY or socket.gethostname(),
        lease_duration=settings.LEADER_ELECTION_LEASE_DURATION_SECONDS,
        renew_deadline=settings.LEADER_ELECTION_RENEW_DEADLINE_SECONDS,
        retry_period=settings.LEADER_ELECTION_RETRY_PERIOD_SECONDS,
    )


def _observer(backend: LeaseHolder, name: str, identity: str) -> Elector:
    """A reader of Lease ``name`` over ``backend``'s API (it never writes it), as ``identity``."""
    with _observers_guard:
        mine = _observers.setdefault(backend, {})
        if name not in mine:
            mine[name] = backend.new_elector(_config(name, identity))
        return mine[name]


def _other_schedulers(backend: LeaseHolder, elector: Elector) -> str | None:
    """Why this cycle must not run beside another kind of scheduler (None: it may).

    A pool's scheduler and a whole-cluster one hold different Leases, so neither excludes the
    other by its own Lease; each reads the other kind's (only ``get`` on Leases, which the Role
    grants already), before it takes or renews its own. The whole cluster's Lease wins: a pool's
    scheduler waits while it is held (a replica of a release without shards knows no pools' Leases
    at all), and a whole-cluster scheduler waits for the pools' only while it does not lead yet,
    so the two never wait on each other for ever."""
    pool = _pool(backend)
    if pool is None and elector.refusal() is None:
        return None  # it leads already: the pools' schedulers wait for it
    names = [lease_name(backend.scheduler_name)] if pool is not None else [
        lease_name(backend.scheduler_name, p) for p in NodePool.objects.values_list("name", flat=True)
    ]  # fmt: skip
    for name in names:
        if name == elector.config.name:
            continue
        holder = _observer(backend, name, elector.config.identity).live_holder()
        if holder is None:
            continue
        what = "the whole cluster's" if pool is not None else "a node pool's"
        return (
            f"Not scheduling: {what} Lease {settings.LEADER_ELECTION_NAMESPACE}/{name} is held by {holder}. "
            "A whole-cluster scheduler and per-pool schedulers would bind the same pods; run every "
            "scheduler with the same SCHEDULING_SHARDS (it takes over once that Lease is not renewed "
            f"for {elector.config.lease_duration:g} s)"
        )
    return None


@contextmanager
def leadership(backend: ClusterBackend) -> Iterator[str | None]:
    """Yield None when this replica may run a cycle with ``backend`` (and keep the lease renewed
    while it does), else the reason it may not. Backends that hold no lease yield None."""
    elector = elector_for(backend)
    if elector is None or not isinstance(backend, LeaseHolder):
        yield None
        return
    other = _other_schedulers(backend, elector)
    if other is not None:
        yield other
        return
    if not elector.try_acquire_or_renew():
        yield elector.refusal() or "Not the leader"
        return
    backend.guard_writes(elector.refusal)  # checked before every cluster write of the cycle
    renewer = _Renewer(elector)
    renewer.start()
    try:
        yield None
    finally:
        renewer.stop()
