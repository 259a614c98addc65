"""The Lease client of leader election (coordination.k8s.io/v1): client-go's ``leaderelection``.

One ``LeaderElector`` is one candidate for one Lease. The algorithm (cluster/leader_election.py
says when a cycle needs it):

- The holder renews the Lease at the start of each cycle and every ``retry_period`` while the
  cycle runs. Writes are updates with the read resourceVersion, so two candidates never both win
  one round.
- Another candidate takes the Lease only after it has seen the same record unchanged for
  ``lease_duration`` on its own monotonic clock (never comparing wall clocks across machines).
- Fail closed: the holder counts itself leader only until ``renew_deadline`` after the start of
  its last successful renewal, and ``renew_deadline < lease_duration``, so a holder that cannot
  renew (API unreachable, partitioned) stops binding before anyone else may take over.
- The Lease's namespace (``LEADER_ELECTION_NAMESPACE``, ``kai-portal``: deploy/rbac and the chart
  make it) may be missing on a bare cluster. The elector creates it when its account may; else
  every cycle is skipped with a refusal saying what to create (lease_namespace.py).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..base import LeaseConfig
from .client import CALL_ERRORS, release
from .lease_namespace import LeaseNamespace

logger = logging.getLogger(__name__)


class LeaderElector:
    """One candidate for one Lease. Thread-safe: the cycle and its heartbeat share it."""

    def __init__(
        self, api_client: client.ApiClient, config: LeaseConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.coordination = client.CoordinationV1Api(api_client)
        self.namespace = LeaseNamespace(client.CoreV1Api(api_client))
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # when our last successful write was sent
        self._observed: tuple[Any, ...] | None = None  # (holder, renewTime, duration) last seen
        self._observed_at = 0.0
        self.holder: str | None = None
        self.last_error: str | None = None

    @property
    def lease(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    @property
    def renewed_at(self) -> float | None:
        """When (on ``clock``) the last successful renewal was sent; None when we do not hold the lease."""
        with self._lock:
            return self._renewed_at

    def is_leader(self) -> bool:
        renewed = self.renewed_at
        return renewed is not None and self.clock() - renewed < self.config.renew_deadline

    def refusal(self) -> str | None:
        """None while this candidate leads; else why it must not write to the cluster."""
        if self.is_leader():
            return None
        if self.last_error:
            return f"Not the leader: cannot renew the lease {self.lease}: {self.last_error}"
        holder = self.holder or "another replica"
        return (
            f"Not the leader: the lease {self.lease} is held by {holder}; this replica "
            f"({self.config.identity}) takes over if it is not renewed for {self.config.lease_duration:g} s"
        )

    def try_acquire_or_renew(self) -> bool:
        """One round of client-go's tryAcquireOrRenew; True when we hold the lease afterwards."""
        started = self.clock()
        try:
            record = self._read()
        except CALL_ERRORS as error:
            if not self._absent_namespace(error):
                return self._failed(error)
            refusal = self.namespace.create(self.config.namespace)
            if refusal is not None:
                return self._failed_with(refusal)
            record = None  # a namespace just made holds no Lease
        if record is None:
            return self._write(started, None, _lease_body(self.config, None, _now(), 0))
        spec = record.get("spec") or {}
        holder = spec.get("holderIdentity") or None
        other = self._other_live_holder(spec, started)
        if other is not None:
            with self._lock:
                self.holder, self._renewed_at, self.last_error = other, None, None
            return False
        now = _now()
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.config.identity:
            acquired = spec.get("acquireTime") or now
        else:
            acquired, transitions = now, transitions + 1
            logger.info("taking the lease %s over from %s", self.lease, holder or "nobody")
        body = _lease_body(self.config, record["metadata"]["resourceVersion"], now, transitions, acquired)
        return self._write(started, record, body)

    def live_holder(self) -> str | None:
        """Who else holds this Lease now, by the rule ``try_acquire_or_renew`` waits on (another
        identity whose record changed less than its duration ago on our clock; a record seen for
        the first time counts as just renewed); None when nobody does. Reads only.

        A pool's scheduler asks it of the whole-cluster Lease (shards, cluster/leader_election.py).
        Fails closed: a Lease that cannot be read is reported as held, with why."""
        started = self.clock()
        try:
            record = self._read()
        except CALL_ERRORS as error:
            if self._absent_namespace(error):
                return None  # no namespace: no Lease in it
            text = f"{error.status} {error.reason}" if isinstance(error, ApiException) else repr(error)
            return f"unknown (the lease cannot be read: {text})"
        if record is None:
            return None
        return self._other_live_holder(record.get("spec") or {}, started)

    def _other_live_holder(self, spec: dict[str, Any], started: float) -> str | None:
        """Another identity holding the Lease whose record changed less than its duration ago on
        our clock (client-go never compares wall clocks across machines); None if none. Notes the
        record as observed at ``started`` when it is new to us."""
        holder = spec.get("holderIdentity") or None
        observed = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        with self._lock:
            if observed != self._observed:
                self._observed, self._observed_at = observed, started
            observed_at = self._observed_at
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        if holder and holder != self.config.identity and started < observed_at + duration:
            return str(holder)
        return None

    def _read(self) -> dict[str, Any] | None:
        try:
            response: Any = self.coordination.read_namespaced_lease(
                self.config.name, self.config.namespace, _preload_content=False, _request_timeout=5
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        record: dict[str, Any] = json.loads(response.data)
        return record

    def _write(
        self, started: float, record: dict[str, Any] | None, body: dict[str, Any], make_namespace: bool = True
    ) -> bool:
        try:
            lease = _lease_model(body)
            if record is None:
                written = self.coordination.create_namespaced_lease(
                    self.config.namespace, lease, _preload_content=False, _request_timeout=5
                )
            else:
                written = self.coordination.replace_namespaced_lease(
                    self.config.name, self.config.namespace, lease, _preload_content=False, _request_timeout=5
                )
            release(written)  # read, so the next renewal reuses the connection
        except ApiException as error:
            if error.status == 409:  # another candidate wrote first: theirs this round
                with self._lock:
                    self._renewed_at, self.last_error = None, None
                return False
            if record is None and make_namespace and self._absent_namespace(error):
                refusal = self.namespace.create(self.config.namespace)
                if refusal is not None:
                    return self._failed_with(refusal)
                return self._write(started, None, body, make_namespace=False)
            return self._failed(error)
        except CALL_ERRORS as error:
            return self._failed(error)
        spec = body["spec"]
        with self._lock:
            self._renewed_at, self.holder, self.last_error = started, self.config.identity, None
            self._observed = (self.config.identity, spec["renewTime"], spec["leaseDurationSeconds"])
            self._observed_at = started
        return True

    def _absent_namespace(self, error: Exception) -> bool:
        """``error`` comes of the Lease's namespace not existing: a 404, or a 403 for an account
        whose Role lives in that namespace (the read is refused before the server looks)."""
        return (
            isinstance(error, ApiException)
            and error.status in (403, 404)
            and self.namespace.missing(self.config.namespace)
        )

    def _failed(self, error: Exception) -> bool:
        """A round that reached no decision: a holder stays leader until its renew deadline."""
        text = f"{error.status} {error.reason}" if isinstance(error, ApiException) else repr(error)
        return self._failed_with(text)

    def _failed_with(self, text: str) -> bool:
        with self._lock:
            self.last_error = text
        logger.warning("cannot reach the lease %s: %s", self.lease, text)
        return self.is_leader()


def _lease_body(
    config: LeaseConfig, resource_version: str | None, now: str, transitions: int, acquired: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": config.name, "namespace": config.namespace}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version  # optimistic concurrency: 409 if it changed
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": config.identity,
            "leaseDurationSeconds": max(1, round(config.lease_duration)),
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        },
    }


def _lease_model(body: dict[str, Any]) -> client.V1Lease:
    model = client.V1Lease.from_dict(body)
    if model is None:  # from_dict returns None only for a None body
        raise ValueError("empty lease body")
    return model


def _now() -> str:
    """A MicroTime, as the Lease API stores it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
