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

Between cycles nobody renews: with the default 5 s cycles and a 15 s lease the holder keeps it;
with cycles slower than the lease, leadership may move between replicas, never overlap.

Identity: ``LEADER_ELECTION_IDENTITY``, else the host name, which in a pod is the pod's name: the
Celery processes of one worker pod are one replica (their cycles are serialized by the cycle lock
already), so they share the lease instead of skipping each other's cycles.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from kai_portal.cluster.backends import ClusterBackend, Elector, LeaseConfig, LeaseHolder

NAME_LIMIT = 253


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
        config = LeaseConfig(
            namespace=settings.LEADER_ELECTION_NAMESPACE,
            # One lease per scheduler name: portals scheduling different pods do not exclude each other.
            name=(settings.LEADER_ELECTION_LEASE_NAME or f"kai-portal-{backend.scheduler_name}")[:NAME_LIMIT],
            identity=settings.LEADER_ELECTION_IDENTITY or socket.gethostname(),
            lease_duration=settings.LEADER_ELECTION_LEASE_DURATION_SECONDS,
            renew_deadline=settings.LEADER_ELECTION_RENEW_DEADLINE_SECONDS,
            retry_period=settings.LEADER_ELECTION_RETRY_PERIOD_SECONDS,
        )
        backend.elector = backend.new_elector(config)
    return backend.elector


@contextmanager
def leadership(backend: ClusterBackend) -> Iterator[str | None]:
    """Yield None when this replica may run a cycle with ``backend`` (and keep the lease renewed
    while it does), else the reason it may not. Backends that hold no lease yield None."""
    elector = elector_for(backend)
    if elector is None or not isinstance(backend, LeaseHolder):
        yield None
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
