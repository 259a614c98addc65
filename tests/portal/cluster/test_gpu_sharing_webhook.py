"""The GPU-sharing admission webhook: KAI's mutation, through the portal's HTTP stack."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from typing import Any

import pytest
import yaml
from django.test import Client

from kai_portal.cluster.webhook import WEBHOOK_PATH
from tests.kai_examples import GPU_SHARING_EXAMPLES, kai_file

SCHEDULER = "kai-scheduler"


def _review(pod: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "operation": operation, "namespace": "team-a", "object": pod},
    }  # fmt: skip


def _post(body: Any, host: str = "kai-portal-webhook.kai-portal.svc") -> Any:
    # The API server calls the Service's DNS name, which is not one of ALLOWED_HOSTS.
    return Client(HTTP_HOST=host).post(WEBHOOK_PATH, data=json.dumps(body), content_type="application/json")


def _add_ops(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the webhook's JSON Patch: "add" ops on object members (which replace)."""
    out = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] == "add"
        *parents, leaf = op["path"].lstrip("/").split("/")
        target = out
        for key in parents:
            target = target[key]
        target[leaf] = op["value"]
    return out


def _apply(pod: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    review = _review(pod)
    answer = _post(review)
    assert answer.status_code == 200, answer.content
    response = answer.json()["response"]
    assert response["uid"] == review["request"]["uid"] and response["allowed"] is True
    if "patch" not in response:
        return pod, response
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    return _add_ops(pod, ops), response


@pytest.mark.parametrize("example", GPU_SHARING_EXAMPLES)
def test_kai_examples_get_kai_s_configmap_references(example: str) -> None:
    pod = yaml.safe_load(kai_file(f"docs/gpu-sharing/{example}"))
    mutated, _ = _apply(pod)
    prefix = mutated["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert prefix.startswith(pod["metadata"]["name"] + "-") and prefix.endswith("-shared-gpu")
    wanted = pod["metadata"]["annotations"].get("gpu-fraction-container-name")
    names = [c["name"] for c in pod["spec"]["containers"]]
    index = names.index(wanted) if wanted else 0
    capabilities = f"{prefix}-{index}"
    for i, container in enumerate(mutated["spec"]["containers"]):
        if i != index:  # sidecars are untouched
            assert container == pod["spec"]["containers"][i]
            continue
        env = {e["name"]: e["valueFrom"]["configMapKeyRef"] for e in container["env"]}
        assert env["NVIDIA_VISIBLE_DEVICES"] == {"name": capabilities, "key": "NVIDIA_VISIBLE_DEVICES"}
        assert env["GPU_PORTION"] == {"name": capabilities, "key": "GPU_PORTION"}
        assert container["envFrom"] == [{"configMapRef": {"name": f"{capabilities}-evar", "optional": False}}]
    assert {"name": f"{capabilities}-vol", "configMap": {"name": capabilities}} in mutated["spec"]["volumes"]
    assert all(len(v["name"]) <= 63 for v in mutated["spec"]["volumes"])


def test_other_pods_pass_unchanged() -> None:
    whole = {"metadata": {"name": "w"}, "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c"}]}}
    other = {"metadata": {"name": "o", "annotations": {"gpu-fraction": "0.5"}},
             "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c"}]}}  # fmt: skip
    for pod in (whole, other):
        mutated, response = _apply(pod)
        assert mutated == pod and "patch" not in response


def test_long_owner_names_keep_names_within_limits_and_env_is_replaced() -> None:
    pod = {
        "metadata": {"generateName": "x" * 80 + "-", "ownerReferences": [{"name": "y" * 90, "kind": "Job"}],
                     "annotations": {"gpu-memory": "2000"}},
        "spec": {"schedulerName": SCHEDULER, "containers": [
            {"name": "c", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                  {"name": "KEEP", "value": "1"}]}
        ]},
    }  # fmt: skip
    mutated, _ = _apply(pod)
    env = mutated["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["KEEP", "NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION"]
    volume = mutated["spec"]["volumes"][0]["name"]
    assert volume.startswith("yyy") and len(volume) <= 63
    evar = mutated["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"]
    assert len(evar) <= 63


def test_a_missing_fraction_container_is_refused_with_the_reason() -> None:
    annotations = {"gpu-fraction": "0.5", "gpu-fraction-container-name": "gpu"}
    pod = {"metadata": {"name": "p", "annotations": annotations},
           "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "main"}]}}  # fmt: skip
    response = _post(_review(pod)).json()["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400 and "'gpu'" in response["status"]["message"]


def test_bad_reviews_get_a_400() -> None:
    assert _post({"kind": "Nope"}).status_code == 400
    answer = Client().post(WEBHOOK_PATH, data="{not json", content_type="application/json")
    assert answer.status_code == 400
    assert Client().get(WEBHOOK_PATH).status_code == 405


def test_an_init_container_named_for_the_fraction_gets_the_i_prefixed_configmap() -> None:
    # KAI looks among init containers first; their ConfigMaps end in "-i<index>".
    annotations = {"gpu-fraction": "0.25", "gpu-fraction-container-name": "warm"}
    pod = {"metadata": {"name": "p", "annotations": annotations},
           "spec": {"schedulerName": SCHEDULER, "initContainers": [{"name": "setup"}, {"name": "warm"}],
                    "containers": [{"name": "main"}]}}  # fmt: skip
    mutated, _ = _apply(pod)
    prefix = mutated["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    warm = mutated["spec"]["initContainers"][1]
    assert {e["valueFrom"]["configMapKeyRef"]["name"] for e in warm["env"]} == {f"{prefix}-i1"}
    assert mutated["spec"]["initContainers"][0] == {"name": "setup"}
    assert mutated["spec"]["containers"] == [{"name": "main"}]


def test_a_pod_already_carrying_a_prefix_keeps_it() -> None:
    # Re-invocation (or a pod re-created from its own YAML) must not point at new ConfigMaps.
    pod = {"metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5",
                                                     "runai/shared-gpu-configmap": "p-abcdefg-shared-gpu"}},
           "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "main"}]}}  # fmt: skip
    mutated, _ = _apply(pod)
    assert mutated["metadata"]["annotations"]["runai/shared-gpu-configmap"] == "p-abcdefg-shared-gpu"
    assert mutated["spec"]["volumes"] == [{"name": "p-abcdefg-shared-gpu-0-vol",
                                           "configMap": {"name": "p-abcdefg-shared-gpu-0"}}]  # fmt: skip
