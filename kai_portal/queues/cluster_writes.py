"""The portal's queue edits written to the cluster's KAI ``Queue`` objects (kubernetes mode, issue 16).

In kubernetes mode the Queue objects are the source of truth, so a queue created, edited or
deleted in the browser or the API is written to its object in the same request, inside the
request's database transaction and after the row was saved (and validated by the portal's
rules): if the cluster refuses the write, the exception rolls the row (and its audit entry)
back and the user is told why; nothing is half-saved. The form views and the API both call
``publish`` / ``unpublish``; the simulated cluster (``make run``) makes both no-ops.

* A row without ``cluster_uid`` (created in the portal) becomes a new object.
* A row read from the cluster is written with a JSON merge patch whose
  ``metadata.resourceVersion`` is the version the portal last read (the scheduling cycle keeps
  it current), so an object changed in the cluster since is refused ("changed in the cluster
  since ...; reload"), never overwritten. The merge patch carries every field the portal owns
  (the spec KAI's way, the node-pool label) and leaves other labels, annotations and spec
  fields the portal does not know alone.
* A queue is never renamed in the cluster (object names are fixed): refused.

The new resourceVersion and uid are stored on the row, so the next cycle sees its own write as
already applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from kai_portal.queues.kai_yaml import NODE_POOL_LABEL, queue_document
from kai_portal.queues.models import Queue

if TYPE_CHECKING:
    from kai_portal.cluster.backends.kubernetes import QueueObjects

# Spec keys the portal owns but writes only when set: a merge patch must clear them (null) otherwise.
_OPTIONAL_SPEC = ("displayName", "parentQueue", "preemptMinRuntime", "reclaimMinRuntime")
_objects: QueueObjects | None = None


class QueueWriteRefused(Exception):
    """The cluster did not take the write; ``conflict`` when its object changed (else unavailable)."""

    def __init__(self, message: str, *, conflict: bool) -> None:
        super().__init__(message)
        self.conflict = conflict


def enabled() -> bool:
    return bool(settings.CLUSTER_BACKEND == "kubernetes")


def queue_objects() -> QueueObjects:
    """One client per process, from the pod's ServiceAccount (else the kubeconfig), made on first use."""
    global _objects
    if _objects is None:
        from kai_portal.cluster.backends.kubernetes import QueueObjects, load_api_client

        _objects = QueueObjects(load_api_client())
    return _objects


def publish(queue: Queue, previous_name: str | None = None, seen_version: str | None = None) -> None:
    """Write the saved ``queue`` to its Queue object. Call inside the transaction that saved it.

    ``seen_version``: the resourceVersion the user's page was rendered from (the form sends it);
    the precondition is that one, so an object that changed after the page was shown is refused
    even when a cycle has already copied the change into the row. Default: the stored one.
    """
    if not enabled():
        return
    if seen_version:
        queue.cluster_resource_version = seen_version
    from kai_portal.cluster.backends.kubernetes import QueueObjectConflict, QueueObjectUnavailable

    if queue.cluster_uid and previous_name is not None and previous_name != queue.name:
        raise QueueWriteRefused(
            f"the queue '{previous_name}' is a Queue object in the cluster, and Kubernetes objects cannot be "
            "renamed; keep its name (or create a new queue). Nothing was saved.",
            conflict=True,
        )
    document = queue_document(Queue.objects.select_related("parent", "node_pool").get(pk=queue.pk))
    try:
        if not queue.cluster_uid:
            written = queue_objects().create(document)
        else:
            written = queue_objects().patch(
                queue.name, _merge_patch(document, queue), since=queue.cluster_resource_version
            )
    except QueueObjectConflict as error:
        raise QueueWriteRefused(_sentence(str(error)), conflict=True) from None
    except QueueObjectUnavailable as error:
        raise QueueWriteRefused(_sentence(str(error)), conflict=False) from None
    metadata = written.get("metadata") or {}
    queue.cluster_uid = str(metadata.get("uid") or "")
    queue.cluster_resource_version = str(metadata.get("resourceVersion") or "")
    queue.cluster_message = ""
    # update(): bookkeeping, not an edit of the queue (no second audit entry).
    Queue.objects.filter(pk=queue.pk).update(
        cluster_uid=queue.cluster_uid,
        cluster_resource_version=queue.cluster_resource_version,
        cluster_message="",
    )


def publish_imported(names: list[str]) -> None:
    """``publish`` every queue a Queue YAML import created or updated, parents first."""
    if not enabled():
        return
    from kai_portal.queues.kai_yaml import tree_order

    for queue in tree_order(list(Queue.objects.filter(name__in=names).select_related("parent"))):
        publish(queue)


def unpublish(queue: Queue) -> None:
    """Delete the deleted ``queue``'s Queue object (if it is still the one the portal read)."""
    if not enabled() or not queue.cluster_uid:
        return
    from kai_portal.cluster.backends.kubernetes import QueueObjectConflict, QueueObjectUnavailable

    try:
        queue_objects().delete(queue.name, queue.cluster_uid, queue.cluster_resource_version)
    except QueueObjectConflict as error:
        raise QueueWriteRefused(_sentence(str(error)), conflict=True) from None
    except QueueObjectUnavailable as error:
        raise QueueWriteRefused(_sentence(str(error)), conflict=False) from None


def _merge_patch(document: dict[str, Any], queue: Queue) -> dict[str, Any]:
    spec = dict(document["spec"])
    for key in _OPTIONAL_SPEC:
        spec.setdefault(key, None)
    labels = document["metadata"].get("labels") or {}
    metadata: dict[str, Any] = {
        # The preconditions: the API server refuses the patch (409) unless the object is still this one.
        "resourceVersion": queue.cluster_resource_version,
        "uid": queue.cluster_uid,
        "labels": {NODE_POOL_LABEL: labels.get(NODE_POOL_LABEL)},
    }
    return {"metadata": metadata, "spec": spec}


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
