"""KAI's pod grouping by owners, done by the portal: which pod group (job) a pod is in, and its settings.

KAI's pod-grouper (pkg/podgrouper in KAI Scheduler) walks a pod's ownerReferences to
the top owner (podgrouper.go: GetPodOwners) and hands the top owner to a plugin chosen
by its group/version/kind (podgrouper/hub/hub.go). The plugin names the PodGroup and
sets its queue, gang minimum (minMember), priority class and preemptibility. In a
cluster without KAI nobody writes PodGroups, so the portal does the same reasoning
here, on owner objects the backend reads (``OwnerReader``). What is kept from KAI:

* top owner: ownerReferences are followed until an object has none. An owner we may
  not read (an unknown kind, a refused or failed GET) ends the walk at the last owner
  we could read, as KAI does for Forbidden (``handleGetOwnerError``); if not even the
  pod's own owner is readable, the pods group by that owner reference. The first
  reference is followed (KAI gives up on an owner with several; the portal follows
  the first so the pods are still scheduled).
* plugins (min = the PodGroup's minMember):
  - Deployment (plugins/deployment): one pod group *per pod* (each replica is its
    own gang of 1), default priority class ``inference``;
  - batch Job (plugins/job): min from the Job's ``kai.scheduler/batch-min-member``;
  - CronJob (plugins/cronjobs): grouped by the Job the CronJob made, not the CronJob;
  - PyTorchJob/TFJob/XGBoostJob/JAXJob/MPIJob (plugins/kubeflow): min from
    ``runPolicy.schedulingPolicy.minAvailable``, else (PyTorchJob only)
    ``elasticPolicy.minReplicas``, else the sum of the replica specs' replicas;
  - JobSet (plugins/jobset): one group for the JobSet; KAI gangs it with sub-groups
    (a replica of each replicatedJob needs its parallelism, or the template's
    batch-min-member); the portal's jobs have no sub-groups yet, so the minimum is
    flattened to the sum over the replicatedJobs KAI requires (all of them, or the
    ``batch-min-member`` smallest when the JobSet's annotation asks for fewer);
  - RayCluster/RayJob/RayService (plugins/ray): 1 head + per worker group
    (minReplicas if > 0, else replicas) x numOfHosts, read from the RayCluster;
    priority class from the ``ray.io/priority-class-name`` label;
  - LeaderWorkerSet (plugins/leaderworkerset): one group per LWS group index,
    min = ``leaderWorkerTemplate.size`` (LeaderReady: 1 until the leader is placed);
  - anything else (ReplicaSet, StatefulSet, a bare Pod, ...): the default grouper,
    min 1.
* queue: the top owner's queue label, else the pod's (defaultgrouper.CalcPodGroupQueue).
* priority class (defaultgrouper.calcPriorityClassWithDefaults): for each owner from
  the pod up, the owner's ``priorityClassName`` label, else the pod's label, else the
  pod's ``spec.priorityClassName``; the first that names an existing PriorityClass
  wins, else the plugin's default (``train``; ``inference`` for Deployments). Which
  classes exist is only known at observe time, so the candidates are kept in order.
* preemptibility: the ``kai.scheduler/preemptibility`` label of the owners, then the
  pod's; unset means "by priority" (KAI: priority >= 100 is non-preemptible).
* age: KAI orders a queue's jobs by their PodGroup's creationTimestamp, and the podgrouper
  makes the PodGroup as the first pod of its owner appears. The portal takes the
  creationTimestamp of the object the group is named for: the top owner (the Job a CronJob
  made; the pod itself for a bare pod or a Deployment's replica), so a job keeps its age
  when its pods are re-created and a backlog seen in one cycle keeps its arrival order.
Left out: KAI's per-kind defaults ConfigMap, MPIJob's WaitForWorkersReady launcher
rule, sub-groups, topology annotations, and the "skip top owner" kinds (Argo, run.ai).

PodGroup objects and PriorityClasses, which take over from or complete this, are applied in
``pod_grouping.py``.

Owners are read by ``OwnerCache``: one GET per owner (by uid), cached; the owners of a full list
are read level by level, side by side.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client

from ..base import JobRef
from .client import CALL_ERRORS
from .objects import parse_time

Json = Mapping[str, Any]
# (namespace, ownerReference) -> the owner object as JSON, or None when it cannot be read.
OwnerReader = Callable[[str, Json], Json | None]

BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"
PRIORITY_CLASS_LABEL = "priorityClassName"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
RAY_PRIORITY_CLASS_LABEL = "ray.io/priority-class-name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
TRAIN, INFERENCE = "train", "inference"
MAX_OWNER_DEPTH = 10  # a reference loop must not hang the cycle

# Owner kinds the backend may read, by (API group, kind) -> resource (plural). The
# ClusterRole grants `get` on exactly these; tests/deploy derives the rules from here.
TYPED_OWNERS = {
    ("", "Pod"): "pods",  # LeaderWorkerSet: a worker StatefulSet is owned by its leader pod
    ("apps", "ReplicaSet"): "replicasets",
    ("apps", "Deployment"): "deployments",
    ("apps", "StatefulSet"): "statefulsets",
    ("batch", "Job"): "jobs",
    ("batch", "CronJob"): "cronjobs",
}
CUSTOM_OWNERS = {
    ("kubeflow.org", "PyTorchJob"): "pytorchjobs",
    ("kubeflow.org", "TFJob"): "tfjobs",
    ("kubeflow.org", "MPIJob"): "mpijobs",
    ("kubeflow.org", "XGBoostJob"): "xgboostjobs",
    ("kubeflow.org", "JAXJob"): "jaxjobs",
    ("jobset.x-k8s.io", "JobSet"): "jobsets",
    ("ray.io", "RayCluster"): "rayclusters",
    ("ray.io", "RayJob"): "rayjobs",
    ("ray.io", "RayService"): "rayservices",
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "leaderworkersets",
}
# Kinds with a plugin of their own in KAI's hub; the rest go to the default grouper.
PLUGIN_KINDS = {
    ("apps", "Deployment"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    *CUSTOM_OWNERS,
}
# Kubeflow kinds -> the spec field holding their replica specs (plugins/kubeflow/*).
KUBEFLOW_REPLICA_SPECS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
}


@dataclass(frozen=True)
class Grouping:
    """A pod's pod group and the settings its owners give it (None: the pod's own stand)."""

    job: JobRef
    queue: str | None = None
    min_member: int | None = None
    # Names to try in order against the cluster's PriorityClasses, then the default.
    priority_candidates: tuple[str, ...] = ()
    default_priority_class: str = TRAIN
    preemptibility: str | None = None
    # The creationTimestamp of the object the group is named for (None: unknown; the pod's own).
    created_at: datetime | None = None
    # The PodGroup KAI's podgrouper would write for this group (pod_groups.py writes it).
    pod_group: PodGroupSource | None = None


@dataclass(frozen=True)
class PodGroupSource:
    """What KAI's podgrouper names and copies a PodGroup from (defaultgrouper.GetPodGroupMetadata).

    ``name`` is ``pg-<owner name>-<owner uid>`` of the plugin's owner; ``owner`` its
    ownerReference (apiVersion, kind, name, uid); ``top`` the top owner whose labels and
    annotations the PodGroup inherits (a Deployment's pods: the Deployment, owned by the pod)."""

    name: str
    owner: Mapping[str, str]
    top: Mapping[str, str]  # apiVersion, kind, name, uid of the top owner (top-owner-metadata)
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


def api_group(api_version: str) -> str:
    """ "apps/v1" -> "apps"; "v1" (core) -> ""."""
    return api_version.rpartition("/")[0]


def readable(api_version: str, kind: str) -> bool:
    key = (api_group(api_version), kind)
    return key in TYPED_OWNERS or key in CUSTOM_OWNERS


def group_pod(raw: Json, queue_label_keys: Sequence[str], read: OwnerReader) -> Grouping:
    """The pod group KAI's pod-grouper would put this pod in (its PodGroup annotation aside),
    with the PodGroup it would write for it."""
    meta = raw.get("metadata") or {}
    first = owner_ref(meta)
    chain = _owner_chain(meta.get("namespace", ""), first, read) if first is not None else []
    grouping = _group_pod(raw, queue_label_keys, first, chain)
    return _with(grouping, pod_group=pod_group_source(raw, grouping, first, chain))


def _group_pod(raw: Json, queue_label_keys: Sequence[str], first: Json | None, chain: list[Json]) -> Grouping:
    meta = raw.get("metadata") or {}
    namespace, pod_name = meta.get("namespace", ""), meta.get("name", "")
    if first is None:  # plugins/podjob: the pod is its own top owner
        grouping = _default(raw, raw, [raw], queue_label_keys, JobRef(namespace, "Pod", pod_name))
        return _with(grouping, created_at=_created(raw))
    if not chain:
        # Not even the pod's own owner is readable: its pods still belong together.
        return _default(raw, raw, [raw], queue_label_keys, JobRef(namespace, first["kind"], first["name"]))
    top = chain[-1]
    group, kind = api_group(str(top.get("apiVersion", ""))), str(top.get("kind", ""))
    top_name = (top.get("metadata") or {}).get("name", "")
    job = JobRef(namespace, kind, top_name)
    if (group, kind) == ("apps", "Deployment"):
        # plugins/deployment/deployment_grouper.go: PodGroup "pg-<pod>-<pod uid>" owned by the
        # pod, priority from the Deployment only, default inference.
        grouping = _default(raw, top, [top], queue_label_keys, JobRef(namespace, "Pod", pod_name))
        return _with(grouping, default_priority_class=INFERENCE, created_at=_created(raw))
    if (group, kind) == ("batch", "CronJob") and len(chain) >= 2:
        job_obj = chain[-2]  # plugins/cronjobs: the Job the CronJob made is the group
        name = (job_obj.get("metadata") or {}).get("name", "")
        grouping = _default(raw, job_obj, [job_obj], queue_label_keys, JobRef(namespace, "Job", name))
        return _with(grouping, created_at=_created(job_obj))
    # The hub hands every owner to the default grouper; the kind plugins call it with the top
    # owner alone, so only the top owner's labels count there (KAI's GetPodGroupMetadata calls).
    owners = [top] if (group, kind) in PLUGIN_KINDS else chain
    grouping = _with(_default(raw, top, owners, queue_label_keys, job), created_at=_created(top))
    if (group, kind) == ("batch", "Job"):
        return _with(grouping, min_member=as_int(_annotations(top).get(BATCH_MIN_MEMBER_ANNOTATION)))
    if group == "kubeflow.org" and kind in KUBEFLOW_REPLICA_SPECS:
        return _with(grouping, min_member=_kubeflow_min(top, kind))
    if (group, kind) == ("jobset.x-k8s.io", "JobSet"):
        return _with(grouping, min_member=_jobset_min(top))
    if group == "ray.io":
        cluster = next((o for o in chain if o.get("kind") == "RayCluster"), top)
        ray_class = _labels(top).get(RAY_PRIORITY_CLASS_LABEL)
        candidates = (ray_class, *grouping.priority_candidates) if ray_class else grouping.priority_candidates
        return _with(grouping, min_member=_ray_min(cluster), priority_candidates=candidates)
    if (group, kind) == ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"):
        return _lws(raw, top, grouping)
    return grouping


def pod_group_source(raw: Json, grouping: Grouping, first: Json | None, chain: list[Json]) -> PodGroupSource:
    """The PodGroup of ``grouping`` as KAI's plugins name it: the top owner (the pod itself for a
    bare pod or a Deployment's replica; a CronJob's Job) owns it, LeaderWorkerSet groups add
    ``-group-<index>`` (plugins/leaderworkerset)."""
    pod: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": raw.get("metadata") or {}}
    top: Json = pod
    if chain:
        top = chain[-1]
        if _kind(top) == ("batch", "CronJob") and len(chain) >= 2:
            top = chain[-2]
    elif first is not None:  # an unreadable owner is known by its reference only
        top = {**first, "metadata": {"name": first["name"], "uid": first.get("uid")}}
    owner = pod if _kind(top) == ("apps", "Deployment") else top
    owner_meta = owner.get("metadata") or {}
    name = f"pg-{owner_meta.get('name', '')}-{owner_meta.get('uid') or ''}"
    if _kind(top) == ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"):
        name += grouping.job.name[len(str((top.get("metadata") or {}).get("name", ""))) :]  # -group-<index>
    return PodGroupSource(
        name=name,
        owner=_reference(owner),
        top=_reference(top),
        labels=dict(_labels(top)),
        annotations=dict(_annotations(top)),
    )


def _kind(obj: Json) -> tuple[str, str]:
    return api_group(str(obj.get("apiVersion", ""))), str(obj.get("kind", ""))


def _reference(obj: Json) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid") or ""),
    }


def owner_ref(meta: Json) -> Json | None:
    """The reference KAI follows: the first (podgrouper.go getResourceOwners)."""
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("kind") and r.get("name")]
    return refs[0] if refs else None


def _owner_chain(namespace: str, ref: Json, read: OwnerReader) -> list[Json]:
    chain: list[Json] = []
    next_ref: Json | None = ref
    while next_ref is not None and len(chain) < MAX_OWNER_DEPTH:
        api_version, kind = str(next_ref.get("apiVersion", "")), str(next_ref["kind"])
        obj = read(namespace, next_ref) if readable(api_version, kind) else None
        uid = next_ref.get("uid")
        if obj is None or (uid and (obj.get("metadata") or {}).get("uid") != uid):
            break  # unreadable, or a new object of the same name (KAI: "owner ... not found")
        chain.append({"apiVersion": api_version, "kind": kind, **obj})
        next_ref = owner_ref(obj.get("metadata") or {})
    return chain


def _default(
    pod: Json, top: Json, owners: Sequence[Json], queue_label_keys: Sequence[str], job: JobRef
) -> Grouping:
    """plugins/defaultgrouper: queue, priority candidates and preemptibility; min 1."""
    pod_labels = _labels(pod)
    top_labels = _labels(top)
    queue = next((top_labels[k] for k in queue_label_keys if top_labels.get(k)), None) or next(
        (pod_labels[k] for k in queue_label_keys if pod_labels.get(k)), None
    )
    pod_class = pod_labels.get(PRIORITY_CLASS_LABEL) or (pod.get("spec") or {}).get("priorityClassName")
    candidates: list[str] = []
    for owner in owners:
        name = _labels(owner).get(PRIORITY_CLASS_LABEL) or pod_class
        if name and name not in candidates:
            candidates.append(name)
    preemptibility = next(
        (
            value
            for value in (
                *(_labels(o).get(PREEMPTIBILITY_LABEL) for o in owners),
                pod_labels.get(PREEMPTIBILITY_LABEL),
            )
            if value in ("preemptible", "non-preemptible")
        ),
        None,
    )
    # min None: KAI says 1; the pods' own batch-min-member (the portal's pods) may still raise it.
    return Grouping(job, queue, None, tuple(candidates), TRAIN, preemptibility)


def _with(grouping: Grouping, **changes: Any) -> Grouping:
    return Grouping(**{**grouping.__dict__, **changes})


def _kubeflow_min(top: Json, kind: str) -> int | None:
    spec = top.get("spec") or {}
    min_available = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("minAvailable")
    if isinstance(min_available, int):
        return min_available
    min_replicas = (spec.get("elasticPolicy") or {}).get("minReplicas")
    if kind == "PyTorchJob" and isinstance(min_replicas, int):
        return min_replicas
    specs = spec.get(KUBEFLOW_REPLICA_SPECS[kind]) or {}
    total = sum(as_int((s or {}).get("replicas"), 0) or 0 for s in specs.values())
    return total or None  # KAI refuses a job with no replicas; the pods' own settings stand


def _jobset_min(top: Json) -> int | None:
    per_job = []
    for rj in (top.get("spec") or {}).get("replicatedJobs") or []:
        template = rj.get("template") or {}
        leaf = as_int(
            ((template.get("metadata") or {}).get("annotations") or {}).get(BATCH_MIN_MEMBER_ANNOTATION)
        )
        parallelism = as_int((template.get("spec") or {}).get("parallelism"), 1) or 1
        per_job.append((as_int(rj.get("replicas"), 1) or 1) * (leaf or parallelism))
    if not per_job:
        return None
    wanted = len(per_job)
    override = as_int(_annotations(top).get(BATCH_MIN_MEMBER_ANNOTATION))
    if override is not None and override >= 1:
        wanted = min(override, wanted)
    elif ((top.get("spec") or {}).get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder":
        wanted = 1  # the JobSet controller creates one replicatedJob at a time
    return sum(sorted(per_job)[:wanted])


def _ray_min(cluster: Json) -> int:
    total = 1  # the head
    for group in (cluster.get("spec") or {}).get("workerGroupSpecs") or []:
        if group.get("suspended"):
            continue
        hosts = as_int(group.get("numOfHosts"), 1) or 1
        minimum, desired = as_int(group.get("minReplicas"), 0) or 0, as_int(group.get("replicas"), 0) or 0
        total += (minimum if minimum > 0 else desired) * hosts
    return total


def _lws(pod: Json, top: Json, grouping: Grouping) -> Grouping:
    spec = top.get("spec") or {}
    size = as_int((spec.get("leaderWorkerTemplate") or {}).get("size"))
    labels = _labels(pod)
    minimum = size
    if spec.get("startupPolicy") == "LeaderReady":
        size = as_int(_annotations(pod).get(LWS_SIZE_ANNOTATION), size or 1)
        leader_unplaced = labels.get(LWS_WORKER_INDEX_LABEL) == "0" and not (pod.get("spec") or {}).get(
            "nodeName"
        )
        minimum = 1 if leader_unplaced else size
    index = labels.get(LWS_GROUP_INDEX_LABEL)
    job = grouping.job
    if index is not None and index.isdigit():
        job = JobRef(job.namespace, job.kind, f"{job.name}-group-{index}")
    return _with(grouping, job=job, min_member=minimum)


def _created(obj: Json) -> datetime | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def _labels(obj: Json) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _annotations(obj: Json) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def as_int(value: Any, default: int | None = None) -> int | None:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    try:
        return int(str(value)) if value is not None else default
    except ValueError:
        return default


OWNER_RETRY_SECONDS = 30
OWNER_CACHE_LIMIT = 10_000


class OwnerCache:
    """Owner objects read from the API server, once per uid (KAI's pod-grouper reads them too)."""

    def __init__(self, core: client.CoreV1Api, read_threads: int = 8) -> None:
        self.core = core
        self.batch = client.BatchV1Api(core.api_client)
        self.apps = client.AppsV1Api(core.api_client)
        self.custom = client.CustomObjectsApi(core.api_client)
        # Owner GETs of a full list run this many at a time (benchmarks/owner-reads.md).
        self.read_threads = read_threads
        # Owner uid -> the owner object as read (apiVersion, kind, metadata, spec, status)
        self._owners: dict[str, Json] = {}
        self._lock = threading.Lock()
        # Owner uid -> when a read of it failed; not asked again for OWNER_RETRY_SECONDS.
        self._unreadable: dict[str, float] = {}

    def prefetch(self, items: list[dict[str, Any]]) -> None:
        """Read the owners of many pods at once, level by level up their chains.

        One GET per distinct owner is unavoidable on a first list (KAI's pod-grouper
        reads them too); running them side by side keeps a large cluster's first
        cycle short. The walk in group_pod then finds them all cached.
        """
        level = [
            ((i.get("metadata") or {}).get("namespace", ""), owner_ref(i.get("metadata") or {}))
            for i in items
        ]
        for _ in range(MAX_OWNER_DEPTH):
            todo = {
                str(ref.get("uid")): (namespace, ref)
                for namespace, ref in level
                if ref is not None
                and ref.get("uid")
                and str(ref.get("uid")) not in self._owners
                and readable(str(ref.get("apiVersion", "")), str(ref["kind"]))
            }
            if not todo:
                return
            with ThreadPoolExecutor(max_workers=max(1, self.read_threads)) as pool:
                found = list(pool.map(lambda args: self.read(*args), todo.values()))
            level = [
                (namespace, owner_ref(owner.get("metadata") or {}))
                for (namespace, _), owner in zip(todo.values(), found, strict=True)
                if owner is not None
            ]

    def read(self, namespace: str, ref: Json) -> Json | None:
        """An owner object, read once per uid; None when it cannot be read (retried next time).

        Core, apps and batch kinds go through their typed clients; the CRD kinds KAI groups
        (CUSTOM_OWNERS) through CustomObjectsApi on the reference's group/version.
        """
        uid = str(ref.get("uid") or "")
        if uid and uid in self._owners:
            return self._owners[uid]
        failed_at = self._unreadable.get(uid)
        if failed_at is not None and time.monotonic() - failed_at < OWNER_RETRY_SECONDS:
            return None
        api_version, kind, name = str(ref.get("apiVersion", "")), str(ref["kind"]), str(ref["name"])
        group, _, version = api_version.rpartition("/")
        typed: dict[tuple[str, str], Callable[..., Any]] = {
            ("", "Pod"): self.core.read_namespaced_pod,
            ("apps", "ReplicaSet"): self.apps.read_namespaced_replica_set,
            ("apps", "Deployment"): self.apps.read_namespaced_deployment,
            ("apps", "StatefulSet"): self.apps.read_namespaced_stateful_set,
            ("batch", "Job"): self.batch.read_namespaced_job,
            ("batch", "CronJob"): self.batch.read_namespaced_cron_job,
        }
        try:
            # Raw JSON (a urllib3 response) like the lists: cheaper than the client's models.
            if (group, kind) in typed:
                response: Any = typed[group, kind](name, namespace, _preload_content=False)
            elif (group, kind) in CUSTOM_OWNERS:
                plural = CUSTOM_OWNERS[group, kind]
                response = self.custom.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _preload_content=False
                )
            else:
                return None
            raw = json.loads(response.data)
        except CALL_ERRORS:
            # Refused, gone or unreachable: grouping stops at the last owner read. Pods of
            # one owner must not each ask again, but a passing fault is retried soon.
            with self._lock:
                if len(self._unreadable) >= OWNER_CACHE_LIMIT:
                    self._unreadable.clear()
                self._unreadable[uid] = time.monotonic()
            return None
        meta = raw.get("metadata") or {}
        owner: Json = {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                k: meta.get(k)
                for k in ("name", "uid", "labels", "annotations", "ownerReferences", "creationTimestamp")
            },
            # Only the kinds whose grouping reads their spec keep it (a pod template is large).
            "spec": raw.get("spec") if (group, kind) in CUSTOM_OWNERS else {},
            "status": {},
        }
        # Cached under the object's own uid: a new object of the old name is not the old owner.
        if meta.get("uid"):
            with self._lock:  # prefetch threads write here side by side
                if len(self._owners) >= OWNER_CACHE_LIMIT:
                    self._owners.pop(next(iter(self._owners)))
                self._owners[str(meta["uid"])] = owner
        return owner
