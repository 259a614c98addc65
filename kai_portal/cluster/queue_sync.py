"""Make the portal's queues match the cluster's KAI ``Queue`` objects (kubernetes mode, issue 16).

In kubernetes mode the ``scheduling.run.ai/v2`` Queue objects are the source of truth. Each
scheduling cycle, before the pods are synced (so a pod naming a queue created this cycle finds
it), ``sync_queue_objects`` reads them (list + watch, the backend's ``queue_objects``) and:

* **creates or updates** the row of every object whose uid or resourceVersion differs from the
  row's, through the Queue YAML import's rules, given the object as read, with no YAML text
  between (``kai_yaml.apply_documents``: KAI's raw defaults, MB to MiB, the node-pool label,
  the portal's tree rules), one object at a time in a savepoint and
  parents first, so one object the portal cannot take is reported on its row
  (``cluster_message``) and in the log, never stops the others or the cycle. A pool named by a
  label is created when it does not exist yet (nodes may join it later, as in KAI);
* **deletes** the row of a queue whose object is gone (rows that were read from or written to
  the cluster, ``cluster_uid`` set; portal-only rows are left alone), children first, unless it
  still has child queues or jobs (``Job.queue`` protects their history): then the row is kept
  with the reason in ``cluster_message`` and deleted at the first cycle that allows it;
* stores the object's uid and resourceVersion on the row: the precondition of the portal's own
  writes (``queues/cluster_writes.py``), and how the next cycle knows the object is unchanged.

Every row change is audit-logged as the system (source ``queue-sync``). When the objects cannot
be read (no Queue CRD, a refused or failed call) nothing is changed: unknown is not empty.

Shards (issue 30): a node pool's cycle applies only the objects of its pool (the node-pool label;
unlabelled: the parent's pool, else the default pool, as the import decides) and deletes only its
pool's rows whose object is gone from the cluster, so two pools' cycles never write one queue row.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, ProtectedError, Q

from kai_portal.cluster.backends import ClusterBackend, QueueObjectStore
from kai_portal.core.actor import acting_as
from kai_portal.core.units import UNLIMITED
from kai_portal.nodes.models import DEFAULT_POOL_NAME, NodePool
from kai_portal.queues import kai_yaml
from kai_portal.queues.models import Queue
from kai_portal.workloads.choices import JobState

logger = logging.getLogger(__name__)

AUDIT_SOURCE = "queue-sync"


def sync_queue_objects(backend: ClusterBackend, now: datetime, pool: str | None = None) -> None:
    """Read the Queue objects through ``backend`` (its own watch cache) and make the rows match
    (``pool``: that node pool's only).

    A no-op for backends whose cluster holds no Queue objects (the simulated cluster).
    """
    if not isinstance(backend, QueueObjectStore):
        return
    observed = backend.queue_objects.observe()
    if observed is None:
        return
    with transaction.atomic(), acting_as(None, AUDIT_SOURCE):
        apply_queue_objects(observed, pool)


def apply_queue_objects(observed: dict[str, dict[str, Any]], pool: str | None = None) -> None:
    """Create, update and delete rows so they match ``observed`` (name -> Queue object); with
    ``pool``, only that node pool's objects and rows."""
    rows = {q.name: q for q in Queue.objects.select_related("node_pool")}
    changed = [
        obj for name, obj in observed.items()
        if name not in rows or (rows[name].cluster_uid, rows[name].cluster_resource_version) != _version(obj)
    ]  # fmt: skip
    if pool is not None:
        pools = object_pools(observed, {name: row.node_pool.name for name, row in rows.items()})
        changed = [obj for obj in changed if pools[obj["metadata"]["name"]] == pool]
    for obj in _parents_first(changed):
        _apply_object(obj, rows.get(obj["metadata"]["name"]))
    gone = [
        row for name, row in rows.items()
        if row.cluster_uid and name not in observed and (pool is None or row.node_pool.name == pool)
    ]  # fmt: skip
    for row in _children_first(gone):
        _remove(row)


def object_pools(observed: dict[str, dict[str, Any]], row_pools: dict[str, str]) -> dict[str, str]:
    """Each Queue object's node pool as the import gives it: its node-pool label, else its parent's
    pool (the parent's object, else its row), else the default pool."""
    out: dict[str, str] = {}

    def pool_of(name: str, path: frozenset[str]) -> str:
        if name in out:
            return out[name]
        obj = observed.get(name)
        if obj is None:
            return row_pools.get(name, DEFAULT_POOL_NAME)
        label = ((obj.get("metadata") or {}).get("labels") or {}).get(kai_yaml.NODE_POOL_LABEL)
        parent = (obj.get("spec") or {}).get("parentQueue")
        if isinstance(label, str) and label:
            found = label
        elif isinstance(parent, str) and parent and parent not in path:
            found = pool_of(parent, path | {parent})
        else:
            found = DEFAULT_POOL_NAME
        out[name] = found
        return found

    for name in observed:
        pool_of(name, frozenset({name}))
    return out


def _version(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("uid") or ""), str(metadata.get("resourceVersion") or "")


def _apply_object(obj: dict[str, Any], row: Queue | None) -> None:
    name = obj["metadata"]["name"]
    uid, resource_version = _version(obj)
    labels = obj["metadata"].get("labels") or {}
    spec, adapted = _capped_by_limits(obj.get("spec") or {})
    document = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }
    try:
        with transaction.atomic():  # a savepoint: an object that fails leaves no trace
            pool = labels.get(kai_yaml.NODE_POOL_LABEL)
            if isinstance(pool, str) and pool:
                NodePool.objects.get_or_create(name=pool)
            kai_yaml.apply_documents([kai_yaml.document_from_object(document)])
    except (kai_yaml.QueueYamlError, ValidationError, IntegrityError) as error:
        # Not stored: the next cycle tries again (the parent may arrive, the rule may pass).
        why = f"{error.key}: {error.message}" if isinstance(error, kai_yaml.QueueYamlError) else str(error)
        _report(name, row, f"The cluster's Queue object (resourceVersion {resource_version}) is not "
                           f"applied: {why}")  # fmt: skip
        return
    Queue.objects.filter(name=name).update(
        cluster_uid=uid, cluster_resource_version=resource_version, cluster_message="; ".join(adapted)
    )
    if adapted:
        logger.info("queue %s: %s", name, "; ".join(adapted))


def _capped_by_limits(spec: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The object's spec with each quota above its limit lowered to the limit, and what was lowered.

    KAI accepts a Queue whose quota exceeds its limit (its webhook only warns; an omitted limit is
    0, as in KAI's own hierarchy example) and never lets the queue hold more than the limit, so
    the quota above it is never reached. The portal's rows require limit >= quota; storing the
    quota the limit leaves (a quota of -1, "unlimited", included) schedules the queue as KAI does
    instead of refusing a KAI user's object. The row says what was lowered."""
    resources = spec.get("resources")
    if not isinstance(resources, dict):
        return spec, []
    out = {**spec, "resources": dict(resources)}
    adapted: list[str] = []
    for resource, section in resources.items():
        if not isinstance(section, dict):
            continue
        quota, limit = section.get("quota", 0), section.get("limit", 0)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (quota, limit)):
            continue  # the import's own checks name what is wrong
        if limit >= 0 and (quota == UNLIMITED or quota > limit):
            out["resources"][resource] = {**section, "quota": limit}
            adapted.append(
                f"{resource} quota {quota:g} is above its limit {limit:g}: the limit caps the queue "
                f"(as in KAI), so the portal uses quota {limit:g}"
            )
    return out, adapted


def _remove(row: Queue) -> None:
    counts = Queue.objects.filter(pk=row.pk).aggregate(
        children=Count("children", distinct=True),
        active=Count("jobs", filter=Q(jobs__state__in=JobState.active()), distinct=True),
        jobs=Count("jobs", distinct=True),
    )
    if counts["children"]:
        reason = f"it still has {counts['children']} child queue(s)"
    elif counts["active"]:
        reason = f"it still has {counts['active']} pending or running job(s)"
    elif counts["jobs"]:
        reason = f"it holds the history of {counts['jobs']} finished job(s)"
    else:
        try:
            with transaction.atomic():  # a row a concurrent write just tied to a job stays
                row.delete()
        except (ProtectedError, IntegrityError) as error:
            reason = f"it is still referenced ({error})"
        else:
            logger.info("queue %s deleted: its Queue object is gone from the cluster", row.name)
            return
    _report(row.name, row, f"The Queue object was deleted in the cluster; the portal keeps the queue "
                           f"because {reason}.")  # fmt: skip


def _report(name: str, row: Queue | None, message: str) -> None:
    """On the row (shown on the queue's page) and in the log, once per distinct message."""
    message = message[:1000]
    if row is not None and row.cluster_message == message:
        return
    logger.warning("queue %s: %s", name, message)
    if row is not None:
        Queue.objects.filter(pk=row.pk).update(cluster_message=message)
        row.cluster_message = message


def _parents_first(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects whose parent is among ``objects`` come after it (a cycle keeps the input order)."""
    by_name = {o["metadata"]["name"]: o for o in objects}
    ordered: list[dict[str, Any]] = []
    placed: set[str] = set()

    def visit(obj: dict[str, Any], path: set[str]) -> None:
        name = obj["metadata"]["name"]
        if name in placed or name in path:
            return
        parent = (obj.get("spec") or {}).get("parentQueue")
        if isinstance(parent, str) and parent in by_name:
            visit(by_name[parent], path | {name})
        placed.add(name)
        ordered.append(obj)

    for obj in sorted(objects, key=lambda o: o["metadata"]["name"]):
        visit(obj, set())
    return ordered


def _children_first(rows: list[Queue]) -> list[Queue]:
    """Deepest first, so a parent deleted with its children goes after them."""
    return sorted(rows, key=lambda row: (-sum(1 for _ in row.ancestors()), row.name))
