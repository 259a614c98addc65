"""The Kubernetes cluster backend, on the official `kubernetes` client.

Observation: the first observe() lists nodes and our pods (field selector
`spec.schedulerName=<ours>`, paged) and keeps each list's resourceVersion;
later calls open a short watch from that version and apply the deltas to a
cached state, so a cycle never re-lists a large cluster. A 410 Gone (the
version was compacted away) falls back to a fresh list.

Writes, each caught on its own so one bad pod never stops the others:
- bind: POST pods/<pod>/binding. The chosen GPU devices travel as annotations
  on the Binding itself; the API server copies a Binding's annotations onto
  the pod in the same write, so devices and node can never disagree:
  `kai.scheduler/gpu-devices` ("0,3") and, for shared GPUs,
  `kai.scheduler/gpu-fraction` (the fraction granted per device).
- evict: POST pods/<pod>/eviction with a policy/v1 Eviction, so
  PodDisruptionBudgets are honoured.
- pod condition: a pending pod the cycle explains as Unschedulable gets
  `PodScheduled=False` (reason Unschedulable, the engine's message) through
  PATCH pods/<pod>/status, as kube-scheduler and KAI write it, so cluster
  autoscalers and `kubectl describe pod` see why it waits. Written when the
  message changes, not every cycle.
- batch Jobs: a pod a Job owns takes the Job's `kai.scheduler/batch-min-member`
  annotation and queue label when it has none of its own (KAI reads both from
  the owner); each Job is read once (GET, cached by uid).
- events: core/v1 Events (involvedObject, reason, message, type,
  source.component, first/lastTimestamp, count). That is what client-go's
  classic recorder writes and what `kubectl describe pod` and
  `kubectl get events` show on every Kubernetes version. A repeat of the same
  event bumps `count` with a PATCH instead of creating a new object, as
  client-go does, so an Unschedulable pod does not flood etcd every cycle.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from .base import (
    ApplyReport,
    Bind,
    ClusterState,
    EventType,
    Evict,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
    TaskStatus,
)
from .gpu_sharing import GpuSharing, GpuSharingUnavailable
from .kubernetes_objects import (
    BATCH_MIN_MEMBER_ANNOTATION,
    GPU_DEVICES_ANNOTATION,
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_NUM_DEVICES_ANNOTATION,
    GPU_RESOURCE,
    POD_GROUP_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
    parse_node,
    parse_pod,
)

GPU_FRACTION_GRANTED_ANNOTATION = "kai.scheduler/gpu-fraction"
# Set on every pod the portal creates; cancel() finds a job's pods by it.
PORTAL_JOB_LABEL = "kai.scheduler/portal-job"
POD_GROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
LIST_PAGE_SIZE = 500
EVENT_CACHE_LIMIT = 10_000
# Binds in flight at once: enough to hide the API server's round trip, few enough that a large
# cycle does not flood it (kube-scheduler binds asynchronously in goroutines, unbounded).
BIND_CONCURRENCY = 16
UNSCHEDULABLE = "Unschedulable"
# Errors that mean "this one call failed", as opposed to a bug in our code.
CALL_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


class KubernetesBackend:
    """A `ClusterBackend` over the Kubernetes API."""

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        scheduler_name: str = "kai-scheduler",
        queue_label_keys: Sequence[str] = ("kai.scheduler/queue", "runai/queue"),
        pool_label: str = "kai.scheduler/node-pool",
        namespace: str = "default",
        watch_timeout_seconds: int = 1,
        gpu_sharing: GpuSharing | None = None,
        bind_concurrency: int = BIND_CONCURRENCY,
    ) -> None:
        self.api_client = api_client or _load_api_client()
        # Binds in flight at once (apply): at most the client's connection pool, which holds
        # cpu_count * 5 connections unless the configuration says otherwise.
        pool_size = getattr(self.api_client.configuration, "connection_pool_maxsize", None) or 1
        self.bind_concurrency = max(1, min(bind_concurrency, pool_size))
        self.core = client.CoreV1Api(self.api_client)
        self.batch = client.BatchV1Api(self.api_client)
        self.scheduler_name = scheduler_name
        self.queue_label_keys = tuple(queue_label_keys)
        self.pool_label = pool_label
        self.namespace = namespace
        self.watch_timeout_seconds = watch_timeout_seconds
        # Shared GPUs: reservation pods and the pods' ConfigMaps (gpu_sharing.py).
        self.gpu_sharing = gpu_sharing or GpuSharing(self.core, scheduler_name=scheduler_name)
        self._nodes: dict[str, ObservedNode] = {}
        self._pods: dict[tuple[str, str], ObservedPod] = {}
        self._node_rv: str | None = None
        self._pod_rv: str | None = None
        # (namespace, kind, name, type, reason, message) -> (event name, count)
        self._recent_events: dict[tuple[str, ...], tuple[str, int]] = {}
        # Job uid -> (batch-min-member, queue) read from the Job object
        self._job_owners: dict[str, tuple[str | None, str | None]] = {}
        # (namespace, pod, uid) -> the Unschedulable message last written to its PodScheduled condition
        self._unschedulable: dict[tuple[str, str, str], str] = {}

    # ----- observe -------------------------------------------------------

    def observe(self) -> ClusterState:
        """Return nodes and our pods; lists once, then follows watches."""
        self._node_rv = self._sync(self._node_rv, self._list_nodes, self.core.list_node, self._apply_node)
        self._pod_rv = self._sync(
            self._pod_rv,
            self._list_pods,
            self.core.list_pod_for_all_namespaces,
            self._apply_pod,
            field_selector=self._pod_selector,
        )
        return ClusterState(
            nodes=dict(self._nodes),
            pods={key: pod for key, pod in self._pods.items() if not self._orphaned(pod)},
            node_resource_version=self._node_rv,
            pod_resource_version=self._pod_rv,
        )

    def _orphaned(self, pod: ObservedPod) -> bool:
        """A live pod bound to a node that no longer exists.

        KAI drops such pods with their node: they hold nothing and must never be
        bound again (the binding would be refused, every cycle). The pod garbage
        collector deletes them from the cluster shortly after.
        """
        finished = pod.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        return bool(pod.node) and pod.node not in self._nodes and not finished

    @property
    def _pod_selector(self) -> str:
        return f"spec.schedulerName={self.scheduler_name}"

    def _sync(
        self,
        resource_version: str | None,
        relist: Callable[[], str | None],
        list_call: Callable[..., Any],
        apply_event: Callable[[str, dict[str, Any]], None],
        **selectors: str,
    ) -> str | None:
        if resource_version is None:
            return relist()
        try:
            return self._watch(resource_version, list_call, apply_event, **selectors)
        except ApiException as error:
            if error.status == 410:  # compacted: our version is too old to resume from
                return relist()
            raise

    def _watch(
        self,
        resource_version: str,
        list_call: Callable[..., Any],
        apply_event: Callable[[str, dict[str, Any]], None],
        **selectors: str,
    ) -> str:
        # return_type "object" keeps events as plain dicts while the client still
        # tracks resource versions and turns ERROR events into ApiException.
        watcher = watch.Watch(return_type="object")
        stream = watcher.stream(
            list_call,
            resource_version=resource_version,
            timeout_seconds=self.watch_timeout_seconds,
            allow_watch_bookmarks=True,
            # A hung connection must not hang the cycle; the server closes first normally.
            _request_timeout=(5, self.watch_timeout_seconds + 5),
            **selectors,
        )
        try:
            for event in stream:
                raw = event["raw_object"]
                resource_version = raw.get("metadata", {}).get("resourceVersion") or resource_version
                if event["type"] != "BOOKMARK":
                    apply_event(event["type"], raw)
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
            # The window ended without a clean close; everything applied so far is
            # valid and the next cycle resumes from the last version we saw.
            pass
        return resource_version

    def _list_nodes(self) -> str | None:
        items, resource_version = self._list_all(self.core.list_node)
        self._nodes = {node.name: node for node in (parse_node(i, self.pool_label) for i in items)}
        return resource_version

    def _list_pods(self) -> str | None:
        items, resource_version = self._list_all(
            self.core.list_pod_for_all_namespaces, field_selector=self._pod_selector
        )
        pods = (self._parse_pod(item) for item in items if self._is_ours(item))
        self._pods = {pod.key: pod for pod in pods}
        return resource_version

    def _list_all(self, list_call: Callable[..., Any], **selectors: str) -> tuple[list[Any], str | None]:
        """Page through a list; the first page's resourceVersion is the snapshot's."""
        items: list[Any] = []
        token: str | None = None
        resource_version: str | None = None
        while True:
            response = list_call(limit=LIST_PAGE_SIZE, _continue=token, _preload_content=False, **selectors)
            page = json.loads(response.data)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            resource_version = resource_version or metadata.get("resourceVersion")
            token = metadata.get("continue")
            if not token:
                return items, resource_version

    def _apply_node(self, event_type: str, raw: dict[str, Any]) -> None:
        node = parse_node(raw, self.pool_label)
        if event_type == "DELETED":
            self._nodes.pop(node.name, None)
        else:
            self._nodes[node.name] = node

    def _apply_pod(self, event_type: str, raw: dict[str, Any]) -> None:
        if not self._is_ours(raw):
            return
        pod = self._parse_pod(raw)
        if event_type == "DELETED":
            self._pods.pop(pod.key, None)
        else:
            self._pods[pod.key] = pod

    def _parse_pod(self, raw: dict[str, Any]) -> ObservedPod:
        pod = parse_pod(raw, self.queue_label_keys)
        owner = _job_owner(raw)
        if owner is None or (pod.queue and BATCH_MIN_MEMBER_ANNOTATION in pod.annotations):
            return pod
        min_member, queue = self._job_settings(pod.namespace, owner)
        annotations = pod.annotations
        if min_member is not None and BATCH_MIN_MEMBER_ANNOTATION not in annotations:
            annotations = {**annotations, BATCH_MIN_MEMBER_ANNOTATION: min_member}
        return replace(pod, annotations=annotations, queue=pod.queue or queue)

    def _job_settings(self, namespace: str, owner: tuple[str, str]) -> tuple[str | None, str | None]:
        """The owning Job's batch-min-member annotation and queue label, read once per Job."""
        name, uid = owner
        if uid not in self._job_owners:
            try:
                # Raw JSON (a urllib3 response) like the lists: cheaper than the client's models.
                response: Any = self.batch.read_namespaced_job(name, namespace, _preload_content=False)
                meta = json.loads(response.data).get("metadata") or {}
            except CALL_ERRORS:
                return None, None  # gone or unreadable: the pod's own settings stand; retried next time
            labels = meta.get("labels") or {}
            queue = next((labels[k] for k in self.queue_label_keys if labels.get(k)), None)
            self._job_owners[uid] = ((meta.get("annotations") or {}).get(BATCH_MIN_MEMBER_ANNOTATION), queue)
            if len(self._job_owners) > EVENT_CACHE_LIMIT:
                self._job_owners.pop(next(iter(self._job_owners)))
        return self._job_owners[uid]

    def _is_ours(self, raw: dict[str, Any]) -> bool:
        # The server filters by field selector already; this guards a server or
        # proxy that ignores it, since binding another scheduler's pod is harmful.
        return bool((raw.get("spec") or {}).get("schedulerName") == self.scheduler_name)

    # ----- apply ---------------------------------------------------------

    def apply(self, binds: list[Bind], evictions: list[Evict], events: list[PodEvent]) -> ApplyReport:
        """Bind, evict and record events; every failure is reported, none raised."""
        report = ApplyReport()
        for result in self.gpu_sharing.start_cycle(self._pods.values()):
            report.add(result)
        for bound, scheduled in self._bind_all(binds):
            report.add(bound)
            report.add(scheduled)
        for eviction in evictions:
            report.add(self._evict(eviction))
            if report.results[-1].ok:
                evicted = _evict_event(eviction)
                report.add(self._post_event(evicted, annotations=_evictor_annotations(eviction)))
        for event in events:
            report.add(self._post_event(event))
            if event.kind == "Pod" and event.reason == UNSCHEDULABLE:
                marked = self._mark_unschedulable(event)
                if marked is not None:
                    report.add(marked)
        return report

    def _bind_all(self, binds: list[Bind]) -> list[tuple[OperationResult, OperationResult]]:
        """Each bind and its Scheduled/FailedBinding event, in the binds' order.

        Binds go out concurrently on a bounded pool (no per-pod round trip in series); each stays
        its own caught call with its own result and event, so a refused bind is reported alone.
        A bind to a shared GPU reserves its device group first (``gpu_sharing``, which keeps
        per-cycle state): those stay in series on this thread."""

        def one(bind: Bind) -> tuple[OperationResult, OperationResult]:
            result = self._bind(bind)
            return result, self._post_event(self._bind_event(bind, result))

        def shared(bind: Bind) -> bool:
            cached = self._pods.get((bind.namespace, bind.pod))
            return cached is not None and cached.gpu.shared

        out: list[tuple[OperationResult, OperationResult] | None] = [None] * len(binds)
        parallel = [i for i, b in enumerate(binds) if not shared(b)]
        if self.bind_concurrency > 1 and len(parallel) > 1:
            with ThreadPoolExecutor(max_workers=min(self.bind_concurrency, len(parallel))) as pool:
                for i, done in zip(parallel, pool.map(one, [binds[i] for i in parallel]), strict=True):
                    out[i] = done
        else:
            for i in parallel:
                out[i] = one(binds[i])
        for i, bind in enumerate(binds):
            if out[i] is None:
                out[i] = one(bind)
        return [o for o in out if o is not None]

    def _mark_unschedulable(self, event: PodEvent) -> OperationResult | None:
        """PodScheduled=False on a pending pod, unless it already says this."""
        cached = self._pods.get((event.namespace, event.name))
        if cached is None or cached.node:
            return None
        key = (event.namespace, event.name, cached.uid)  # a re-created pod starts clean
        if self._unschedulable.get(key) == event.message:
            return None
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": UNSCHEDULABLE,
            "message": event.message,
            "lastProbeTime": None,
            "lastTransitionTime": _rfc3339(datetime.now(UTC).replace(microsecond=0)),
        }
        # A strategic merge patch: conditions merge by type, the pod's others stay.
        body = {"status": {"conditions": [condition]}}
        result = self._call(
            "condition",
            event.namespace,
            event.name,
            lambda: self.core.patch_namespaced_pod_status(
                event.name, event.namespace, body, _preload_content=False
            ),
        )
        if result.ok:
            if len(self._unschedulable) >= EVENT_CACHE_LIMIT:
                self._unschedulable.clear()
            self._unschedulable[key] = event.message
        return result

    def _bind(self, bind: Bind) -> OperationResult:
        annotations: dict[str, str] = {}
        if bind.gpu_devices:
            annotations[GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in bind.gpu_devices)
        if bind.gpu_fraction is not None:
            annotations[GPU_FRACTION_GRANTED_ANNOTATION] = f"{bind.gpu_fraction:g}"
        cached = self._pods.get((bind.namespace, bind.pod))
        if cached is not None and cached.gpu.shared:
            # A shared GPU is reserved and made visible before the pod is bound, never after.
            try:
                annotations.update(self.gpu_sharing.prepare(bind, cached, self._nodes.get(bind.node)))
            except GpuSharingUnavailable as error:
                return OperationResult("bind", bind.namespace, bind.pod, ok=False, error=str(error))
            except CALL_ERRORS as error:
                return _failure("bind", bind.namespace, bind.pod, error)
        body = client.V1Binding(
            api_version="v1",
            kind="Binding",
            # The uid makes the server refuse to bind a re-created pod of the same name.
            metadata=client.V1ObjectMeta(
                name=bind.pod,
                namespace=bind.namespace,
                uid=cached.uid if cached and cached.uid else None,
                annotations=annotations or None,
            ),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=bind.node),
        )
        # _preload_content=False: the server answers with a Status, which the
        # client would fail to deserialize as a V1Binding (a known client quirk).
        return self._call(
            "bind",
            bind.namespace,
            bind.pod,
            lambda: self.core.create_namespaced_pod_binding(
                bind.pod, bind.namespace, body, _preload_content=False
            ),
        )

    def _bind_event(self, bind: Bind, result: OperationResult) -> PodEvent:
        """KAI's Scheduled / FailedBinding pod event for a bind outcome (§8)."""
        if result.ok:
            node = self._nodes.get(bind.node)
            pool = bind.pool or (node.pool if node else None) or "default"
            pod = f"{bind.namespace}/{bind.pod}"
            message = f"Successfully assigned pod {pod} to node {bind.node} at node-pool {pool}"
            return PodEvent(bind.namespace, bind.pod, EventType.NORMAL, "Scheduled", message)
        message = f"Failed to bind pod {bind.namespace}/{bind.pod} to node {bind.node}. {result.error}"
        return PodEvent(bind.namespace, bind.pod, EventType.WARNING, "FailedBinding", message)

    def _evict(self, eviction: Evict) -> OperationResult:
        cached = self._pods.get((eviction.namespace, eviction.pod))
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=eviction.pod, namespace=eviction.namespace),
            delete_options=client.V1DeleteOptions(
                grace_period_seconds=eviction.grace_period_seconds,
                preconditions=client.V1Preconditions(uid=cached.uid) if cached and cached.uid else None,
            ),
        )
        return self._call(
            "evict",
            eviction.namespace,
            eviction.pod,
            lambda: self.core.create_namespaced_pod_eviction(
                eviction.pod, eviction.namespace, body, _preload_content=False
            ),
        )

    def _post_event(self, event: PodEvent, annotations: dict[str, str] | None = None) -> OperationResult:
        key = (event.namespace, event.kind, event.name, event.type, event.reason, event.message)
        now = datetime.now(UTC).replace(microsecond=0)
        previous = self._recent_events.get(key)
        if previous is not None:
            name, count = previous
            result = self._call(
                "event",
                event.namespace,
                name,
                lambda: self.core.patch_namespaced_event(
                    name,
                    event.namespace,
                    {"count": count + 1, "lastTimestamp": _rfc3339(now)},
                    _preload_content=False,
                ),
            )
            if result.ok:
                self._recent_events[key] = (name, count + 1)
                return result
            # The old event expired (events live about an hour): write a new one.
        name = f"{event.name}.{time.time_ns():x}"
        body = _event_body(event, name, now, self.scheduler_name, annotations)
        result = self._call(
            "event",
            event.namespace,
            name,
            lambda: self.core.create_namespaced_event(
                event.namespace, _event_model(body), _preload_content=False
            ),
        )
        if result.ok:
            if len(self._recent_events) >= EVENT_CACHE_LIMIT:
                self._recent_events.clear()
            self._recent_events[key] = (name, 1)
        return result

    # ----- submit / cancel -------------------------------------------------

    def submit(self, request: PodSpecRequest) -> ApplyReport:
        """Create the job's pods, one per task, named <job>-<index>."""
        report = ApplyReport()
        for index in range(request.num_tasks):
            body = self._pod_body(request, f"{request.job_name}-{index}")
            name = body["metadata"]["name"]
            report.add(
                self._call(
                    "submit",
                    request.namespace,
                    name,
                    partial(
                        self.core.create_namespaced_pod,
                        request.namespace,
                        _pod_model(body),
                        _preload_content=False,
                    ),
                )
            )
        return report

    def cancel(self, namespace: str, job: str) -> ApplyReport:
        """Delete every pod the portal created for the job."""
        report = ApplyReport()
        try:
            items, _ = self._list_all(
                lambda **kw: self.core.list_namespaced_pod(namespace, **kw),
                label_selector=f"{PORTAL_JOB_LABEL}={job}",
            )
        except CALL_ERRORS as error:
            report.add(_failure("cancel", namespace, job, error))
            return report
        for item in items:
            name = item["metadata"]["name"]
            report.add(
                self._call(
                    "cancel",
                    namespace,
                    name,
                    partial(self.core.delete_namespaced_pod, name, namespace, _preload_content=False),
                )
            )
        return report

    def _pod_body(self, request: PodSpecRequest, name: str) -> dict[str, Any]:
        labels = {
            **request.labels,
            self.queue_label_keys[0]: request.queue,
            PORTAL_JOB_LABEL: request.job_name,
        }
        # priorityClassName as a label (§1.7): a spec.priorityClassName naming a
        # class the cluster lacks would make admission reject the pod.
        if request.priority_class:
            labels[PRIORITY_CLASS_LABEL] = request.priority_class
        if request.preemptibility:
            labels[PREEMPTIBILITY_LABEL] = request.preemptibility
        annotations = {**request.annotations, POD_GROUP_ANNOTATION: request.job_name}
        if request.gpu_fraction is not None:
            annotations[GPU_FRACTION_ANNOTATION] = f"{request.gpu_fraction:g}"
        if request.gpu_memory_mib is not None:
            annotations[GPU_MEMORY_ANNOTATION] = str(request.gpu_memory_mib)
        if request.gpu_devices_per_pod > 1 and (request.gpu_fraction or request.gpu_memory_mib):
            annotations[GPU_NUM_DEVICES_ANNOTATION] = str(request.gpu_devices_per_pod)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": request.namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": {
                "schedulerName": self.scheduler_name,
                "restartPolicy": "Never",
                "containers": [_container(request)],
            },
        }

    # ----- plumbing --------------------------------------------------------

    def _call(self, operation: str, namespace: str, name: str, call: Callable[[], Any]) -> OperationResult:
        try:
            call()
        except CALL_ERRORS as error:
            return _failure(operation, namespace, name, error)
        return OperationResult(operation, namespace, name, ok=True)


def _load_api_client() -> client.ApiClient:
    """In-cluster config when running in a pod, else the kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def _job_owner(raw: dict[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the batch/v1 Job controlling the pod, if one does."""
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1" and ref.get("controller"):
            return ref.get("name", ""), ref.get("uid", "")
    return None


def _container(request: PodSpecRequest) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if request.cpu_millis:
        requests["cpu"] = f"{request.cpu_millis}m"
    if request.memory_mib:
        requests["memory"] = f"{request.memory_mib}Mi"
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if request.gpus and request.gpu_fraction is None and request.gpu_memory_mib is None:
        resources["limits"] = {GPU_RESOURCE: str(request.gpus)}
    container: dict[str, Any] = {"name": "main", "image": request.image, "resources": resources}
    if request.command:
        container["command"] = list(request.command)
    return container


def _event_body(
    event: PodEvent, name: str, now: datetime, component: str, annotations: dict[str, str] | None
) -> dict[str, Any]:
    api_version = POD_GROUP_API_VERSION if event.kind == "PodGroup" else "v1"
    involved: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": event.kind,
        "name": event.name,
        "namespace": event.namespace,
    }
    if event.uid:
        involved["uid"] = event.uid
    metadata: dict[str, Any] = {"name": name, "namespace": event.namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message,
        "type": str(event.type),
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": _rfc3339(now),
        "lastTimestamp": _rfc3339(now),
        "count": 1,
    }


def _event_model(body: dict[str, Any]) -> client.CoreV1Event:
    model = client.CoreV1Event.from_dict(body)
    if model is None:  # from_dict returns None only for a None body
        raise ValueError("empty event body")
    return model


def _pod_model(body: dict[str, Any]) -> client.V1Pod:
    model = client.V1Pod.from_dict(body)
    if model is None:
        raise ValueError("empty pod body")
    return model


def _evict_event(eviction: Evict) -> PodEvent:
    return PodEvent(eviction.namespace, eviction.pod, EventType.NORMAL, "Evict", eviction.message)


def _evictor_annotations(eviction: Evict) -> dict[str, str]:
    # The annotations KAI puts on its Evict events (§8).
    annotations = {"num-evicted-pods": "1", "evictor-action-type": eviction.action}
    if eviction.evictor_job:
        annotations["evictor-pod-group-name"] = eviction.evictor_job
    if eviction.evictor_namespace:
        annotations["evictor-pod-group-namespace"] = eviction.evictor_namespace
    return annotations


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _failure(operation: str, namespace: str, name: str, error: Exception) -> OperationResult:
    status = error.status if isinstance(error, ApiException) else None
    return OperationResult(operation, namespace, name, ok=False, error=_error_text(error), status_code=status)


def _error_text(error: Exception) -> str:
    """The API's own message when there is one (a Status body), else the exception."""
    if isinstance(error, ApiException):
        try:
            message = json.loads(error.body or "").get("message")
        except (ValueError, AttributeError):
            message = None
        return f"{error.status} {error.reason}: {message}" if message else f"{error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"
