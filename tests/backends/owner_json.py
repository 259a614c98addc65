"""Owner objects and pods as raw JSON, and a reader serving them, for the pod-grouping tests.

Plain dicts as the backend's cached GETs serve them (``owners.OwnerReader``).
"""

from __future__ import annotations

from typing import Any

from kai_portal.cluster.backends.kubernetes.owners import Json

QUEUE_KEYS = ("kai.scheduler/queue", "runai/queue")
NS = "ml"


def owner_object(api_version: str, kind: str, name: str, *, owner: Json | None = None,
         labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         spec: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{kind}-{name}",
                            "labels": labels or {}, "annotations": annotations or {}}  # fmt: skip
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec or {}}


def owner_reference(obj: Json) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True}  # fmt: skip


class Reader:
    """Serves owner objects by uid; records what was read; refuses what it does not hold."""

    def __init__(self, *objects: Json) -> None:
        self.objects = {o["metadata"]["uid"]: o for o in objects}
        self.reads: list[str] = []

    def __call__(self, namespace: str, ref: Json) -> Json | None:
        self.reads.append(f"{ref['kind']}/{ref['name']}")
        return self.objects.get(ref.get("uid", ""))


def pod_object(name: str, owner: Json | None = None, **kw: Any) -> dict[str, Any]:
    return owner_object("v1", "Pod", name, owner=owner, **kw)
