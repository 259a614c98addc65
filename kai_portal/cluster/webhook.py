"""The GPU-sharing mutating admission webhook (AdmissionReview v1), served by the portal.

When a pod that asks for part of a GPU (``gpu-fraction`` / ``gpu-memory``) and
names our scheduler is created, the API server sends it here before storing
it. We add what KAI's webhook adds, under KAI's names, so the binder can make
the chosen GPU visible later without touching the running pod's spec:

- annotation ``runai/shared-gpu-configmap``: the name prefix of the pod's
  ConfigMaps (``<owner or pod name>-<7 random>-shared-gpu``);
- on the fraction container (``gpu-fraction-container-name``, else the first):
  env ``NVIDIA_VISIBLE_DEVICES``, ``RUNAI_NUM_OF_GPUS`` and ``GPU_PORTION`` from
  the capabilities ConfigMap ``<prefix>-<index>`` (``-i<index>`` for an init
  container), and ``envFrom`` the ConfigMap ``<prefix>-<index>-evar``;
- a ConfigMap volume ``<prefix>-<index>-vol``.

The binder (``backends/kubernetes/gpu_sharing.py``) creates and fills those ConfigMaps
before it binds the pod; until then the kubelet cannot start the container,
so no container ever runs without its GPU. Every other pod is allowed
unchanged. The answer is a JSON Patch; a pod we cannot mutate (a container
name that does not exist) is refused with the reason.

``ProbeMiddleware``-style, :class:`WebhookMiddleware` answers the path before
host validation and the HTTPS redirect: the API server calls the Service's
DNS name, which is not one of the portal's hosts, and the connection is TLS.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
import string
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse

from kai_portal.cluster.backends.kubernetes.gpu_sharing import (
    CONFIGMAP_ANNOTATION,
    GPU_PORTION,
    NUM_OF_GPUS,
    VISIBLE_DEVICES,
    ContainerRef,
    capabilities_configmap,
    env_configmap,
    fraction_container,
)

WEBHOOK_PATH = "/k8s/webhooks/gpu-sharing/"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
CONFIGMAP_SUFFIX = "shared-gpu"
# Volume names are DNS labels (63): "<prefix>-<index>-vol", the prefix holding 7 random characters.
MAX_VOLUME_NAME = 63
RANDOM_CHARS = 7
MAX_REVIEW_BYTES = 3 * 1024 * 1024  # the API server's own request limit


def requests_shared_gpu(pod: dict[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return GPU_FRACTION in annotations or GPU_MEMORY in annotations


def configmap_prefix(pod: dict[str, Any], ref: ContainerRef) -> str:
    """``<base>-<random>-shared-gpu``, short enough for the longest name built from it."""
    meta = pod.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    base = (
        (owners[0].get("name") if owners else None) or meta.get("name") or meta.get("generateName") or "pod"
    )
    room = MAX_VOLUME_NAME - len(CONFIGMAP_SUFFIX) - RANDOM_CHARS - 2 - len("-vol")
    room -= len(ref.suffix) + 1 + len("-evar")
    base = str(base)[:room].rstrip(".-") or "pod"
    alphabet = string.ascii_lowercase + string.digits
    token = "".join(secrets.choice(alphabet) for _ in range(RANDOM_CHARS))
    return f"{base}-{token}-{CONFIGMAP_SUFFIX}"


def volume_name(configmap: str) -> str:
    return f"{configmap}-vol".lower()


def mutate(pod: dict[str, Any]) -> dict[str, Any]:
    """The mutated copy of a shared-GPU pod (the caller checked it is one). Raises ValueError."""
    pod = copy.deepcopy(pod)
    meta = pod.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {}) or {}
    meta["annotations"] = annotations
    spec = pod.setdefault("spec", {})
    ref = fraction_container(spec, annotations)
    prefix = annotations.get(CONFIGMAP_ANNOTATION) or configmap_prefix(pod, ref)
    annotations[CONFIGMAP_ANNOTATION] = prefix
    capabilities = capabilities_configmap(prefix, ref)
    evar = env_configmap(prefix, ref)
    container = spec["initContainers" if ref.init else "containers"][ref.index]
    env = [
        e
        for e in container.get("env") or []
        if e.get("name") not in (VISIBLE_DEVICES, NUM_OF_GPUS, GPU_PORTION)
    ]
    for key in (VISIBLE_DEVICES, NUM_OF_GPUS, GPU_PORTION):
        env.append({"name": key, "valueFrom": {"configMapKeyRef": {"name": capabilities, "key": key}}})
    container["env"] = env
    env_from = container.get("envFrom") or []
    if not any((e.get("configMapRef") or {}).get("name") == evar for e in env_from):
        env_from.append({"configMapRef": {"name": evar, "optional": False}})
    container["envFrom"] = env_from
    volume = volume_name(capabilities)
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != volume]
    volumes.append({"name": volume, "configMap": {"name": capabilities}})
    spec["volumes"] = volumes
    return pod


def patch_for(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON Patch from ``before`` to ``after`` over the parts ``mutate`` changes ("add" replaces)."""
    ops = []
    for path, old, new in (
        (
            "/metadata/annotations",
            (before.get("metadata") or {}).get("annotations"),
            after["metadata"]["annotations"],
        ),
        ("/spec/containers", (before.get("spec") or {}).get("containers"), after["spec"].get("containers")),
        (
            "/spec/initContainers",
            (before.get("spec") or {}).get("initContainers"),
            after["spec"].get("initContainers"),
        ),
        ("/spec/volumes", (before.get("spec") or {}).get("volumes"), after["spec"].get("volumes")),
    ):
        if new is not None and new != old:
            ops.append({"op": "add", "path": path, "value": new})
    return ops


def review(body: dict[str, Any], scheduler_name: str) -> dict[str, Any]:
    """The AdmissionReview answer for one request."""
    request = body.get("request")
    if body.get("kind") != "AdmissionReview" or not isinstance(request, dict) or "uid" not in request:
        raise ValueError("not an AdmissionReview v1 request")
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    pod = request.get("object")
    kind = (request.get("kind") or {}).get("kind")
    if (
        kind == "Pod"
        and request.get("operation") == "CREATE"
        and isinstance(pod, dict)
        and (pod.get("spec") or {}).get("schedulerName") == scheduler_name
        and requests_shared_gpu(pod)
    ):
        try:
            mutated = mutate(pod)
        except (ValueError, LookupError, TypeError, AttributeError) as error:
            response["allowed"] = False
            response["status"] = {"code": 400, "message": f"GPU sharing: {error}"}
        else:
            ops = patch_for(pod, mutated)
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def gpu_sharing_webhook(request: HttpRequest) -> HttpResponse:
    """POST an AdmissionReview v1; get the review back with a JSON Patch for shared-GPU pods."""
    if request.method != "POST":
        return JsonResponse({"detail": "POST an AdmissionReview"}, status=405)
    length = int(request.headers.get("Content-Length") or 0)
    if length > MAX_REVIEW_BYTES:
        return JsonResponse({"detail": "AdmissionReview too large"}, status=413)
    try:
        raw = request.body
    except RequestDataTooBig:
        return JsonResponse({"detail": "AdmissionReview too large"}, status=413)
    try:
        body = json.loads(raw)
        answer = review(body, settings.SCHEDULER_NAME)
    except (ValueError, TypeError, AttributeError) as error:
        return JsonResponse({"detail": f"bad AdmissionReview: {error}"}, status=400)
    return JsonResponse(answer)


class WebhookMiddleware:
    """Answers the webhook path before host validation, CSRF and the HTTPS redirect."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # The API server's client joins URL paths, which drops a trailing slash: take both.
        if request.path_info.rstrip("/") == WEBHOOK_PATH.rstrip("/"):
            return gpu_sharing_webhook(request)
        return self.get_response(request)
