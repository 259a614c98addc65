"""The portal's own jobs as pods: create them, delete them, and the namespaces they run in.

A job submitted in the portal becomes ``num_tasks`` pods named ``<job>-<index>`` in the team's
namespace, labelled with the job's name and uid (cancel and the sync find them by it), grouped by
the ``pod-group-name`` annotation, scheduled by us (``schedulerName``). A user's manifest gives the
pod spec; else the portal builds one container from the request (meeting the team's restricted
Pod Security standard itself when the team is at "restricted").
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from kubernetes import client

from ..base import ApplyReport, OperationResult, PodSpecRequest
from .client import CALL_ERRORS, Caller, Lister, failure
from .objects import (
    BATCH_MIN_MEMBER_ANNOTATION,
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_NUM_DEVICES_ANNOTATION,
    GPU_RESOURCE,
    POD_GROUP_ANNOTATION,
    PORTAL_JOB_LABEL,
    PORTAL_JOB_UID_LABEL,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
)


class PortalJobs:
    """Creates and deletes the pods of portal jobs, and the namespaces they need."""

    def __init__(
        self,
        core: client.CoreV1Api,
        caller: Caller,
        lister: Lister,
        scheduler_name: str,
        queue_label_keys: tuple[str, ...],
    ) -> None:
        self.core = core
        self.caller = caller
        self.lister = lister
        self.scheduler_name = scheduler_name
        self.queue_label_keys = queue_label_keys

    def submit(self, request: PodSpecRequest) -> ApplyReport:
        """Create the job's pods, one per task, named <job>-<index>; stops at the first refusal
        (the caller deletes what was created: a job is in the cluster whole or not at all)."""
        report = ApplyReport()
        for index in range(request.num_tasks):
            body = self.pod_body(request, f"{request.job_name}-{index}")
            name = body["metadata"]["name"]
            report.add(
                self.caller.call(
                    "submit",
                    request.namespace,
                    name,
                    partial(
                        self.core.create_namespaced_pod,
                        request.namespace,
                        pod_model(body),
                        _preload_content=False,
                    ),
                )
            )
            if not report.results[-1].ok:
                break
        return report

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> OperationResult:
        """Create a namespace for portal jobs (only where the portal is allowed to) with ``labels``
        (its Pod Security labels); one that already exists is fine."""
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels or None))
        result = self.caller.call(
            "namespace", "", name, lambda: self.core.create_namespace(body, _preload_content=False)
        )
        if result.status_code == 409:
            return OperationResult("namespace", "", name, ok=True)
        return result

    def label_namespace(self, name: str, labels: dict[str, str]) -> OperationResult:
        """Set ``labels`` on a namespace the portal made (a team's pod security level changed);
        a namespace not there yet (404) gets them when it is created."""
        body = {"metadata": {"labels": labels}}
        return self.caller.call(
            "namespace", "", name, lambda: self.core.patch_namespace(name, body, _preload_content=False)
        )

    def cancel(self, namespace: str, job: str, uid: str = "") -> ApplyReport:
        """Delete every pod the portal created for the job (by its uid label when given, else its
        name label). A pod already gone counts as deleted."""
        report = ApplyReport()
        selector = f"{PORTAL_JOB_UID_LABEL}={uid}" if uid else f"{PORTAL_JOB_LABEL}={job}"
        try:
            items, _ = self.lister.list_all(
                lambda **kw: self.core.list_namespaced_pod(namespace, **kw),
                label_selector=selector,
            )
        except CALL_ERRORS as error:
            report.add(failure("cancel", namespace, job, error))
            return report
        for item in items:
            name = item["metadata"]["name"]
            result = self.caller.call(
                "cancel",
                namespace,
                name,
                partial(self.core.delete_namespaced_pod, name, namespace, _preload_content=False),
            )
            report.add(
                OperationResult("cancel", namespace, name, ok=True) if result.status_code == 404 else result
            )
        return report

    def pod_body(self, request: PodSpecRequest, name: str) -> dict[str, Any]:
        """The pod ``name`` of ``request``, as the API server is sent it (plain JSON)."""
        template = request.pod_template
        labels = {
            **(template.labels if template else {}),
            **request.labels,
            self.queue_label_keys[0]: request.queue,
            PORTAL_JOB_LABEL: request.job_name,
        }
        if request.job_uid:
            labels[PORTAL_JOB_UID_LABEL] = request.job_uid
        # priorityClassName as a label (§1.7): a spec.priorityClassName naming a
        # class the cluster lacks would make admission reject the pod.
        if request.priority_class:
            labels[PRIORITY_CLASS_LABEL] = request.priority_class
        if request.preemptibility:
            labels[PREEMPTIBILITY_LABEL] = request.preemptibility
        annotations = {
            **(template.annotations if template else {}),
            **request.annotations,
            POD_GROUP_ANNOTATION: request.job_name,
        }
        if request.min_member is not None:
            annotations[BATCH_MIN_MEMBER_ANNOTATION] = str(request.min_member)
        # A manifest may carry the GPU-sharing annotations on a Job rather than its pod template:
        # the pod needs them (KAI and the webhook read the pod's).
        if request.gpu_fraction is not None:
            annotations.setdefault(GPU_FRACTION_ANNOTATION, f"{request.gpu_fraction:g}")
        if request.gpu_memory_mib is not None:
            annotations.setdefault(GPU_MEMORY_ANNOTATION, str(request.gpu_memory_mib))
        if request.gpu_devices_per_pod > 1 and (request.gpu_fraction or request.gpu_memory_mib):
            annotations.setdefault(GPU_NUM_DEVICES_ANNOTATION, str(request.gpu_devices_per_pod))
        if template is not None:
            # The user's own pod spec, deep-copied (the request stays untouched), scheduled by us.
            spec: dict[str, Any] = {
                **json.loads(json.dumps(template.spec)),
                "schedulerName": self.scheduler_name,
            }
        else:
            spec = {"schedulerName": self.scheduler_name, "restartPolicy": "Never",
                    "containers": [container(request)]}  # fmt: skip
            if request.pod_security == "restricted":
                # The portal builds this pod, so it meets the team's restricted standard itself
                # (the namespace's PodSecurity admission would refuse it otherwise).
                spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
                spec["containers"][0]["securityContext"] = {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": request.namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }


def container(request: PodSpecRequest) -> dict[str, Any]:
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


def pod_model(body: dict[str, Any]) -> client.V1Pod:
    """The client's model of a pod body; ValueError when the body is not a pod."""
    model = client.V1Pod.from_dict(body)
    if model is None:
        raise ValueError("empty pod body")
    return model
