"""Entrypoint of a GPU reservation pod: report the GPU the device plugin gave it, then hold it.

Run as ``python -m kai_portal.cluster.reservation`` (which calls ``main`` here) in the portal's
own image (no Django, no database). The NVIDIA device plugin puts the one GPU this pod
requested into ``NVIDIA_VISIBLE_DEVICES`` (its UUID); the entrypoint writes it
into the pod's annotation ``run.ai/reserve_for_gpu_index``, where the binder
(``gpu_sharing.py``) waits for it, and then sleeps until the pod is
deleted, holding the GPU for the pods that share it. ``POD_NAME`` and
``POD_NAMESPACE`` come from the downward API.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading

from kubernetes import client

from .client import load_api_client
from .gpu_sharing import GPU_INDEX_ANNOTATION, VISIBLE_DEVICES


def visible_gpu(environ: dict[str, str]) -> str:
    """The single GPU the device plugin made visible; anything else is a setup error."""
    value = environ.get(VISIBLE_DEVICES, "").strip()
    devices = [d for d in value.split(",") if d and d not in ("all", "none", "void")]
    if len(devices) != 1:
        raise SystemExit(f"{VISIBLE_DEVICES}={value!r}: expected exactly one GPU from the device plugin")
    return devices[0]


def report(api: client.CoreV1Api, name: str, namespace: str, gpu: str) -> None:
    api.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {GPU_INDEX_ANNOTATION: gpu}}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="exit after reporting (tests)")
    args = parser.parse_args(argv)
    environ = dict(os.environ)
    gpu = visible_gpu(environ)
    try:
        name, namespace = environ["POD_NAME"], environ["POD_NAMESPACE"]
    except KeyError as missing:
        raise SystemExit(f"{missing.args[0]} is not set (downward API)") from None
    report(client.CoreV1Api(load_api_client()), name, namespace, gpu)
    print(f"reserved {gpu} for pod {namespace}/{name}", flush=True)
    if args.once:
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    return 0
