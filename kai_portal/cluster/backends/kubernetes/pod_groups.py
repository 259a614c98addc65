"""The PodGroup objects KAI's podgrouper writes, and their status as KAI's controllers write it.

Under KAI every workload gets a ``PodGroup`` (scheduling.run.ai/v2alpha2) within seconds, and
dashboards, ``kubectl get podgroups`` and the queue controller read them. Who writes what there,
and what the portal writes in its place (docs/kai-objects.md lists every field):

Nothing is written where PodGroups cannot be listed (a cluster without KAI's CRD).

- podgrouper (pkg/podgrouper/podgroup/handler.go): creates ``pg-<owner>-<uid>`` with the owner's
  reference, the top owner's labels and annotations (plus ``kai.scheduler/top-owner-metadata``),
  ``spec.minMember``, ``queue``, ``priorityClassName``, ``preemptibility`` and
  ``topologyConstraint``. Here: ``desired_pod_group`` from the grouping owners.py computed (the
  same plugins); a pod that names a PodGroup (``pod-group-name``, as the portal's own jobs do)
  gets that name, owned by its pods. Only groups without a PodGroup get one, and a PodGroup the
  portal did not write (KAI's podgrouper, a user's) is never changed: a create that answers 409
  leaves the other writer's object as it is.
- podgroup controller (pkg/podgroupcontroller): ``status.resourcesStatus``: ``requested`` (pods
  Pending or Running), ``allocated`` (pods Running, or bound and Pending) and
  ``allocatedNonPreemptible`` (the allocated of a non-preemptible group). Here: ``desired_status``
  from ``resource_sums.group_usage``.
- scheduler (cache/status_updater): ``status.schedulingConditions`` (``UnschedulableOnNodePool``
  while the group waits with nothing allocated, cleared once nothing is pending) and the
  ``kai.scheduler/last-start-timestamp`` annotation when the group is allocated.

Writes are idempotent and batched per group (create, then status only when it changed, then the
start annotation), side by side across groups, after the cycle's binds: a bind never waits for
a PodGroup. The status goes through the status subresource as one JSON-patch ``add /status``,
which replaces the status the portal wrote before (a stale resource name cannot linger).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import yaml
from kubernetes import client

from ..base import Bind, ObservedPod, OperationResult, PodEvent, TaskStatus
from .cache import ClusterCache
from .client import FIELD_MANAGER, Caller, concurrently, rfc3339
from .objects import BATCH_MIN_MEMBER_ANNOTATION, POD_GROUP_ANNOTATION
from .owners import Grouping, as_int
from .pod_grouping import WRITTEN_BY, WRITTEN_BY_LABEL
from .resource_sums import FINISHED, Resources, group_usage, quantities

GROUP, VERSION, PLURAL, KIND = "scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup"
MERGE_PATCH, JSON_PATCH = "application/merge-patch+json", "application/json-patch+json"
TOP_OWNER_ANNOTATION = "kai.scheduler/top-owner-metadata"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
USER_KEY = "user"  # copied from the pod when the owner lacks it (defaultgrouper)
DEFAULT_QUEUE = "default-queue"  # KAI's podgrouper, for a group that names no queue
DEFAULT_NODE_POOL = "default"
UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
# The reasons of a job's fit errors: those KAI's API names (v2alpha2 UnschedulableReason) and the
# scheduler's own (podgroup_info: PodSchedulingErrors, OverCapacity); a line of a job's message
# starting "<one>: " is a fit error of that reason (KAI's JobFitErrorsToMessage).
KNOWN_REASONS = ("NonPreemptibleOverQuota", "OverLimit", "PreemptionDelayNotElapsed", "QueueDoesNotExist",
                 "PodSchedulingErrors", "OverCapacity")  # fmt: skip
# A namespace that refuses PodGroup writes (403: no right there, or being deleted; 404: gone): its
# writes pause this long after one failure is reported, instead of failing for every group every
# cycle. Per namespace, so one team deleting its namespace never stops the others' PodGroups. (A
# cluster without KAI's PodGroup CRD writes none at all: its list fails first.)
UNAVAILABLE_PAUSE_SECONDS = 60.0
STATE_LIMIT = 20_000  # groups remembered; forgetting one costs one idempotent status write


@dataclass
class PodGroupPlan:
    """One pod group as the portal would write its PodGroup this cycle."""

    namespace: str
    name: str
    pods: list[ObservedPod] = field(default_factory=list)
    grouping: Grouping | None = None
    exists: bool = False  # a PodGroup of this name is in the cluster
    ours: bool = True  # False: written by someone else; the portal leaves it alone
    _usage: tuple[Resources, Resources, Resources] | None = None

    @property
    def usage(self) -> tuple[Resources, Resources, Resources]:
        """``group_usage`` of the pods, once per cycle (the PodGroup and its queue both use it)."""
        if self._usage is None:
            self._usage = group_usage(self.pods)
        return self._usage


class PodGroupWriter:
    """Creates the missing PodGroups and keeps the status of those the portal wrote."""

    def __init__(
        self,
        custom: client.CustomObjectsApi,
        core: client.CoreV1Api,
        caller: Caller,
        cache: ClusterCache,
        concurrency: int,
    ) -> None:
        self.custom = custom
        self.core = core
        self.caller = caller
        self.cache = cache
        self.concurrency = concurrency
        self.pool_label = cache.pool_label
        self._created: set[tuple[str, str]] = set()  # made here, until the watch shows them
        self._status: dict[tuple[str, str], dict[str, Any]] = {}  # the status last written
        # What each group's status was last worked out from: its pods (the cache's objects, replaced
        # when a pod changes), its waiting message, and the usage summed from them. A group whose
        # pods and message are the same objects as then is not worked out again (50,000 pods).
        self._seen: dict[tuple[str, str], tuple[tuple[ObservedPod, ...], str | None, Any]] = {}
        # (namespace, job name) -> PodGroup name: the cycle's PodGroup events are about jobs.
        self.names: dict[tuple[str, str], str] = {}
        self.plans: dict[tuple[str, str], PodGroupPlan] = {}
        # A pool's scheduler (shards): the pods (namespace, name) whose PodGroups it writes; None: all.
        self.owns: set[tuple[str, str]] | None = None
        self._paused_until: dict[str, float] = {}  # namespace -> monotonic time its writes resume
        # Pods given pod-group-name here (namespace, name, uid), until the watch shows it.
        self._annotated: set[tuple[str, str, str]] = set()

    # ----- what to write -------------------------------------------------

    def plan(
        self, bound_now: Mapping[tuple[str, str], str] | None = None
    ) -> dict[tuple[str, str], PodGroupPlan]:
        """Our pods by the PodGroup they belong to (named by their annotation, else by owners.py);
        ``bound_now`` (pod key -> node): the cycle's binds, which the cache shows next cycle."""
        bound_now = bound_now or {}
        specs = self.cache.pod_group_specs()
        plans: dict[tuple[str, str], PodGroupPlan] = {}
        names: dict[tuple[str, str], str] = {}
        for key, pod in self.cache.pods.items():
            if self.owns is not None and key not in self.owns:
                continue  # another pool's pod (shards): its scheduler writes its PodGroup
            grouping = self.cache.grouping_of(key)
            name = pod.annotations.get(POD_GROUP_ANNOTATION) or (
                grouping.pod_group.name if grouping is not None and grouping.pod_group is not None else None
            )
            if not name:
                continue
            plan = plans.get((pod.namespace, name))
            if plan is None:
                spec = specs.get((pod.namespace, name))
                exists = spec is not None or (pod.namespace, name) in self._created
                plan = PodGroupPlan(pod.namespace, name, grouping=grouping, exists=exists)
                plan.ours = spec.portal if spec is not None else True
                plans[pod.namespace, name] = plan
            node = bound_now.get(key)
            plan.pods.append(
                replace(pod, node=node, status=TaskStatus.BOUND) if node and not pod.node else pod
            )
            names.setdefault((pod.namespace, pod.job.name), name)
        self._created &= {k for k in self._created if k not in specs}  # the watch has them now
        for key, plan in plans.items():
            seen = self._seen.get(key)
            if seen is not None and seen[0] == tuple(plan.pods):
                plan._usage = seen[2]  # the same pods: the same sums
        self.plans, self.names = plans, names
        return plans

    # ----- writing ---------------------------------------------------------

    def write(
        self, binds: Sequence[Bind], bound: Sequence[OperationResult], events: Sequence[PodEvent]
    ) -> list[OperationResult]:
        """Create the missing PodGroups, then write each of ours whose status or start changed."""
        done_binds = [b for b, r in zip(binds, bound, strict=True) if r.ok]
        plans = self.plan({(b.namespace, b.pod): b.node for b in done_binds})
        if not self.cache.pod_groups_listed:
            return []  # a cluster without KAI's PodGroup CRD: nothing to write them to
        now = datetime.now(UTC).replace(microsecond=0)
        started = {self._group_of(b.namespace, b.pod) for b in done_binds}
        bound_keys = {(b.namespace, b.pod) for b in done_binds}  # their Binding named the group
        waiting = {
            (e.namespace, self.names.get((e.namespace, e.name), e.name)): e.message
            for e in events
            if e.kind == "PodGroup" and e.reason == "Unschedulable"
        }

        def one(plan: PodGroupPlan) -> list[OperationResult]:
            if not plan.ours or self._paused(plan.namespace):
                return []
            results: list[OperationResult] = []
            key = (plan.namespace, plan.name)
            if not plan.exists:
                body = desired_pod_group(plan, self.pool_label)
                result = self._create(plan.namespace, body)
                results.append(result)
                if not result.ok:
                    return results
            results += self._annotate_pods(plan, bound_keys)
            old = self._status.get(key)
            pods, message = tuple(plan.pods), waiting.get(key)
            status = desired_status(plan, old, message, self.pool_label, now)
            if status != old:
                result = self._patch_status(plan.namespace, plan.name, status)
                results.append(result)
                if result.ok:
                    self._status[key] = status
            if self._status.get(key) == status:  # written (or already so): not worked out again
                self._seen[key] = (pods, message, plan.usage)
            if key in started:
                results.append(self._mark_started(plan.namespace, plan.name, now))
            return results

        def settled(key: tuple[str, str], plan: PodGroupPlan) -> bool:
            """Written, and nothing it depends on changed since (the same pod objects and words)."""
            seen = self._seen.get(key)
            return (
                plan.exists
                and key not in started
                and seen is not None
                and key in self._status
                and seen[1] == waiting.get(key)
                and seen[0] == tuple(plan.pods)
            )

        todo = [p for key, p in plans.items() if p.ours and not settled(key, p)]
        done = concurrently(self.concurrency, one, todo)
        # In a paused namespace one failure says why; the rest would say the same.
        failed_in: set[str] = set()
        reported: list[OperationResult] = []
        for result in (r for results in done for r in results):
            if not result.ok and result.namespace in self._paused_until:
                if result.namespace in failed_in:
                    continue
                failed_in.add(result.namespace)
            reported.append(result)
        if len(self._status) > STATE_LIMIT or len(self._seen) > STATE_LIMIT:
            self._status = {k: v for k, v in self._status.items() if k in plans}
            self._seen = {k: v for k, v in self._seen.items() if k in plans}
        return reported

    def _annotate_pods(self, plan: PodGroupPlan, bound_keys: set[tuple[str, str]]) -> list[OperationResult]:
        """``pod-group-name`` on the group's pods that lack it, as KAI's podgrouper writes it
        (pod_controller.go), one merge patch per pod once in its life; a pod bound this cycle got
        it on its Binding (binder.py). The pod's uid in the patch makes the server refuse to
        annotate a re-created pod of the same name."""
        results = []
        for pod in plan.pods:
            if POD_GROUP_ANNOTATION in pod.annotations or pod.key in bound_keys or not pod.uid:
                continue
            if pod.status in FINISHED or (pod.namespace, pod.name, pod.uid) in self._annotated:
                continue
            body = {"metadata": {"uid": pod.uid, "annotations": {POD_GROUP_ANNOTATION: plan.name}}}

            def patch(pod: ObservedPod = pod, body: dict[str, Any] = body) -> object:
                return self.core.patch_namespaced_pod(
                    pod.name, pod.namespace, body, field_manager=FIELD_MANAGER, _preload_content=False
                )

            result = self.caller.call("pod-group-name", pod.namespace, pod.name, patch)
            if result.ok:
                if len(self._annotated) > STATE_LIMIT:
                    self._annotated.clear()
                self._annotated.add((pod.namespace, pod.name, pod.uid))
            results.append(result)
        return results

    def _paused(self, namespace: str) -> bool:
        until = self._paused_until.get(namespace)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        del self._paused_until[namespace]
        return False

    def retarget(self, events: Iterable[PodEvent]) -> list[PodEvent]:
        """The cycle's PodGroup events, about the PodGroup objects (a job's events name the job)."""
        out = []
        for event in events:
            name = self.names.get((event.namespace, event.name)) if event.kind == "PodGroup" else None
            out.append(replace(event, name=name) if name and name != event.name else event)
        return out

    def known(self) -> set[tuple[str, str]]:
        """The PodGroups that exist now (or were made this cycle), by (namespace, name)."""
        return {key for key, plan in self.plans.items() if plan.exists} | self._created

    def _group_of(self, namespace: str, pod: str) -> tuple[str, str] | None:
        cached = self.cache.pods.get((namespace, pod))
        if cached is None:
            return None
        return namespace, self.names.get((namespace, cached.job.name), "")

    def _create(self, namespace: str, body: dict[str, Any]) -> OperationResult:
        name = body["metadata"]["name"]
        result = self.caller.call(
            "podgroup",
            namespace,
            name,
            lambda: self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, body, field_manager=FIELD_MANAGER, _preload_content=False
            ),
        )
        if result.ok:
            self._created.add((namespace, name))
        elif result.status_code in (403, 404):  # no right there, the namespace going or gone
            self._paused_until[namespace] = time.monotonic() + UNAVAILABLE_PAUSE_SECONDS
        elif result.status_code == 409:
            # Someone else (KAI's podgrouper, a user) made it meanwhile: theirs, never changed here.
            plan = self.plans.get((namespace, name))
            if plan is not None:
                plan.ours, plan.exists = False, True
            return OperationResult("podgroup", namespace, name, ok=True)
        return result

    def _patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> OperationResult:
        # JSON patch "add" replaces /status whole, so a resource or condition dropped is gone.
        body = [{"op": "add", "path": "/status", "value": status}]
        return self.caller.call(
            "podgroup-status",
            namespace,
            name,
            lambda: self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                body,
                field_manager=FIELD_MANAGER,
                _preload_content=False,
                _content_type=JSON_PATCH,
            ),
        )

    def _mark_started(self, namespace: str, name: str, now: datetime) -> OperationResult:
        body = {"metadata": {"annotations": {LAST_START_ANNOTATION: rfc3339(now)}}}
        return self.caller.call(
            "podgroup",
            namespace,
            name,
            lambda: self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                body,
                field_manager=FIELD_MANAGER,
                _preload_content=False,
                _content_type=MERGE_PATCH,
            ),
        )


# ----- the objects, as pure functions of the plan ----------------------------


def desired_pod_group(plan: PodGroupPlan, pool_label: str) -> dict[str, Any]:
    """The PodGroup KAI's podgrouper would create for ``plan``."""
    first = plan.pods[0]
    source = plan.grouping.pod_group if plan.grouping is not None else None
    # A group the pods name themselves (the portal's jobs), not one named by the podgrouper's
    # own pod-group-name annotation (written on the pods by the Binding or annotate_pods).
    named_by_pods = first.annotations.get(POD_GROUP_ANNOTATION) == plan.name and (
        source is None or source.name != plan.name
    )
    labels: dict[str, str] = dict(source.labels) if source is not None and not named_by_pods else {}
    annotations: dict[str, str] = {}
    if USER_KEY in first.annotations:
        annotations[USER_KEY] = first.annotations[USER_KEY]
    if source is not None and not named_by_pods:
        annotations[TOP_OWNER_ANNOTATION] = top_owner_metadata(source.top)
        annotations.update(source.annotations)
        owners = [dict(source.owner)]
    else:
        # The pods name a group no owner makes (the portal's jobs): it goes when they all have gone.
        owners = [
            {"apiVersion": "v1", "kind": "Pod", "name": p.name, "uid": p.uid}
            for p in sorted(plan.pods, key=lambda p: p.name)
            if p.uid
        ]
    if USER_KEY not in labels and USER_KEY in first.labels:
        labels[USER_KEY] = first.labels[USER_KEY]
    if pool_label not in labels and pool_label in first.labels:
        labels[pool_label] = first.labels[pool_label]
    labels[WRITTEN_BY_LABEL] = WRITTEN_BY
    spec: dict[str, Any] = {
        "minMember": min_member(plan.pods),
        "queue": first.queue or DEFAULT_QUEUE,
        "priorityClassName": first.priority_class or "",
        "topologyConstraint": {},
    }
    if first.preemptibility:
        spec["preemptibility"] = first.preemptibility
    if not spec["priorityClassName"]:
        del spec["priorityClassName"]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": plan.name,
            "namespace": plan.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": owners,
        },
        "spec": spec,
    }


def top_owner_metadata(top: Mapping[str, str]) -> str:
    """``kai.scheduler/top-owner-metadata``: the top owner as YAML (name, uid, group, version, kind)."""
    group, _, version = top.get("apiVersion", "").rpartition("/")
    fields = (("name", top.get("name", "")), ("uid", top.get("uid", "")), ("group", group),
              ("version", version), ("kind", top.get("kind", "")))  # fmt: skip
    return "".join(f"{key}: {_yaml_scalar(value)}\n" for key, value in fields)


def _yaml_scalar(value: str) -> str:
    """As KAI's YAML marshaller writes a string: plain where YAML reads it back as that string,
    else in double quotes (``""`` for an empty group, ``"123"``); PyYAML would single-quote."""
    plain = yaml.safe_dump(value, width=1 << 30)
    if not plain.startswith(("'", '"')):
        return plain.removesuffix("\n...\n").strip()
    return yaml.safe_dump(value, default_style='"', width=1 << 30).strip()


def min_member(pods: Sequence[ObservedPod]) -> int:
    """The group's minimum as its owner or the pods' ``batch-min-member`` give it, else 1."""
    first = pods[0]
    if first.min_member is not None:
        return first.min_member
    declared = as_int(first.annotations.get(BATCH_MIN_MEMBER_ANNOTATION))
    return declared if declared is not None and declared >= 1 else 1


def desired_status(
    plan: PodGroupPlan, old: Mapping[str, Any] | None, waiting: str | None, pool_label: str, now: datetime
) -> dict[str, Any]:
    """The status KAI's podgroup controller and scheduler would leave on the group now.

    ``waiting`` is the cycle's Unschedulable message for the group (None: none this cycle). The
    condition is kept while the group waits, replaced (next transitionID) when its words change,
    and cleared once nothing is pending; a group with a pod allocated gets none (KAI: RUN-20673)."""
    requested, allocated, non_preemptible = plan.usage
    resources: dict[str, Any] = {}
    for key, value in (("allocated", allocated), ("allocatedNonPreemptible", non_preemptible),
                       ("requested", requested)):  # fmt: skip
        if value:
            resources[key] = quantities(value)
    status: dict[str, Any] = {"resourcesStatus": resources}
    previous = list((old or {}).get("schedulingConditions") or [])
    pending = any(p.status in (TaskStatus.PENDING, TaskStatus.GATED) and not p.node for p in plan.pods)
    if not pending:
        return status
    if waiting is not None and not allocated:
        pool = (plan.pods[0].labels.get(pool_label) or DEFAULT_NODE_POOL) if plan.pods else DEFAULT_NODE_POOL
        last = previous[-1] if previous else None
        same = last is not None and last.get("message") == waiting and last.get("nodePool") == pool
        if not same:
            transition = int(last.get("transitionID") or 0) + 1 if last is not None else 1
            previous = [c for c in previous if c.get("nodePool") != pool] + [
                scheduling_condition(pool, waiting, transition, now)
            ]
    if previous:
        status["schedulingConditions"] = previous
    return status


def scheduling_condition(pool: str, message: str, transition: int, now: datetime) -> dict[str, Any]:
    """KAI's UnschedulableOnNodePool condition for a message of the cycle.

    The message is KAI's JobFitErrorsToMessage text: the fit errors' messages joined with ". \n"
    and a "." added at the end; each ``reasons[]`` entry holds one error's own message, so the
    joint and the added full stop are taken off again (a gang's message ends "GPUs..", its
    reason's "GPUs.")."""
    reasons = []
    lines = message.split("\n")
    for i, line in enumerate(lines):
        line = line.removesuffix(". ") if i < len(lines) - 1 else line.removesuffix(".")
        code, sep, text = line.partition(": ")
        if sep and code in KNOWN_REASONS:
            reasons.append({"reason": code, "message": text})
        elif line:
            reasons.append({"message": line})
    return {
        "type": UNSCHEDULABLE_ON_NODE_POOL,
        "nodePool": pool,
        "reason": "Unschedulable",
        "message": message,
        "reasons": reasons,
        "lastTransitionTime": rfc3339(now),
        "status": "True",
        "transitionID": str(transition),
    }
