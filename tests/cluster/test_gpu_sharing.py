"""GPU sharing on a real API server: the portal's webhook, reservation pods and ConfigMaps (issue 19).

The portal's admission webhook runs over TLS on loopback (a threaded WSGI
server around the portal's own WSGI application, with a certificate from a CA
made here) and is registered with the API server by a MutatingWebhookConfiguration,
so every pod below is mutated by the API server calling the portal. The
portal's scheduling cycles (as the ``kai-portal`` ServiceAccount) bind the
pods. KWOK has no device plugin, so a harness thread plays it: for each
reservation pod bound to a test node it picks a GPU of that node no other
reservation pod holds and reports it as the reservation pod's entrypoint does
(``backends/kubernetes/reservation.py``: ``report``), as the pod's own ServiceAccount.
"""

from __future__ import annotations

import base64
import secrets
import socketserver
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import yaml
from django.core.wsgi import get_wsgi_application
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes import gpu_sharing as sharing
from kai_portal.cluster.backends.kubernetes.reservation import report, visible_gpu
from kai_portal.cluster.webhook import WEBHOOK_PATH
from kai_portal.workloads.models import Pod
from tests.kai_examples import GPU_SHARING_EXAMPLES, kai_file
from tests.portal import factories

from .conftest import REPO, Cluster, Nodes, _has_default_account, cycle, kubeconfig_for, pod_body, wait_until

pytestmark = pytest.mark.django_db

RESERVATION_RBAC = REPO / "deploy" / "rbac" / "kai-resource-reservation.yaml"
GPU_MEMORY_LABEL = {"nvidia.com/gpu.memory": "40960"}


# ----- the webhook server ---------------------------------------------------------------


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def webhook_certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA and a serving certificate for 127.0.0.1 signed by it: (ca.crt, tls.crt, tls.key)."""
    d = tmp_path_factory.mktemp("webhook-pki")
    ca_key, ca_crt, key, csr, crt, ext = (d / n for n in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt",
                                                          "tls.ext"))  # fmt: skip
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(ca_key))
    _openssl("req", "-x509", "-new", "-key", str(ca_key), "-subj", "/CN=kai-portal-webhook-test-ca",
             "-days", "2", "-out", str(ca_crt), "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
    _openssl("req", "-new", "-key", str(key), "-subj", "/CN=kai-portal-webhook", "-out", str(csr))
    ext.write_text("keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                   "subjectAltName=IP:127.0.0.1,DNS:localhost\n")  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "2", "-extfile", str(ext), "-out", str(crt))  # fmt: skip
    return ca_crt, crt, key


@pytest.fixture(scope="session")
def webhook_server(webhook_certs: tuple[Path, Path, Path]) -> Iterator[str]:
    """The portal's WSGI application over HTTPS on loopback; yields its webhook URL."""
    _, crt, key = webhook_certs
    httpd = make_server("127.0.0.1", 0, get_wsgi_application(), server_class=_ThreadingWSGIServer,
                        handler_class=_QuietHandler)  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(crt), str(key))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}{WEBHOOK_PATH}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _register_webhook(cluster: Cluster, url: str, ca: Path, scheduler: str, *namespaces: str) -> str:
    """A MutatingWebhookConfiguration for pod CREATE in these namespaces, calling the portal."""
    name = f"kai-portal-gpu-sharing-{secrets.token_hex(3)}"
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "gpu-sharing.kai-portal.io",
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca.read_bytes()).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]},
            "failurePolicy": "Fail",
            # As the Helm chart registers it: only this scheduler's shared-GPU pods are sent.
            "matchConditions": [{"name": "shared-gpu-pod-of-this-scheduler", "expression": (
                f"object.spec.schedulerName == '{scheduler}' && has(object.metadata.annotations) && "
                "('gpu-fraction' in object.metadata.annotations || "
                "'gpu-memory' in object.metadata.annotations)")}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 30,
        }],
    }  # fmt: skip
    client.AdmissionregistrationV1Api(cluster.api).create_mutating_webhook_configuration(body)
    return name


@pytest.fixture
def webhook(cluster: Cluster, webhook_server: str, webhook_certs: tuple[Path, Path, Path], namespace: str,
            scheduler_name: str, settings: Any) -> Iterator[str]:  # fmt: skip
    """The portal's webhook registered for this test's namespace, mutating as soon as it returns."""
    settings.SCHEDULER_NAME = scheduler_name
    name = _register_webhook(cluster, webhook_server, webhook_certs[0], scheduler_name, namespace)
    core = cluster.core
    probe = pod_body("webhook-probe", scheduler_name, annotations={"gpu-fraction": "0.5"})

    def mutated() -> bool:
        # The API server picks up a new configuration within a second or so: probe until it does.
        created = core.create_namespaced_pod(namespace, probe)
        core.delete_namespaced_pod("webhook-probe", namespace, grace_period_seconds=0)
        wait_until(lambda: _gone(core, namespace, "webhook-probe"), "the probe pod to go")
        return sharing.CONFIGMAP_ANNOTATION in (created.metadata.annotations or {})

    wait_until(mutated, "the API server to call the portal's webhook", timeout=60, every=0.5)
    yield name
    client.AdmissionregistrationV1Api(cluster.api).delete_mutating_webhook_configuration(name)


def _gone(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


# ----- the device plugin's part ----------------------------------------------------------


def _account_client(cluster: Cluster, namespace: str, account: str) -> client.ApiClient:
    path = Path(tempfile.mkdtemp(prefix="kai-account-")) / "kubeconfig"
    return config.new_client_from_config(config_file=str(kubeconfig_for(cluster, namespace, account, path)))


class DevicePlugin:
    """Plays the NVIDIA device plugin and the reservation pods' entrypoint for some nodes."""

    def __init__(self, admin: client.CoreV1Api, reporter: client.CoreV1Api, gpus: dict[str, int]) -> None:
        self.admin, self.reporter, self.gpus = admin, reporter, gpus
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def uuid(node: str, index: int) -> str:
        return f"GPU-{node}-{index}"

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._serve_once()
            except Exception as error:  # noqa: BLE001 - reported by the test
                self.errors.append(error)
                return
            self.stop.wait(0.1)

    def _serve_once(self) -> None:
        pods = self.admin.list_namespaced_pod(sharing.RESERVATION_NAMESPACE).items
        for pod in pods:
            node = pod.spec.node_name
            annotations = pod.metadata.annotations or {}
            if node not in self.gpus or sharing.GPU_INDEX_ANNOTATION in annotations:
                continue
            if pod.metadata.deletion_timestamp is not None:
                continue
            held = {(p.metadata.annotations or {}).get(sharing.GPU_INDEX_ANNOTATION)
                    for p in pods if p.spec.node_name == node and p.metadata.deletion_timestamp is None}
            free = [self.uuid(node, i) for i in range(self.gpus[node]) if self.uuid(node, i) not in held]
            assert free, f"the device plugin has no GPU left on {node}"
            # What the container would see, through the entrypoint's own check of it.
            gpu = visible_gpu({"NVIDIA_VISIBLE_DEVICES": free[0]})
            report(self.reporter, pod.metadata.name, sharing.RESERVATION_NAMESPACE, gpu)


@pytest.fixture(scope="session")
def reservation_namespace(cluster: Cluster) -> str:
    cluster.kubectl("apply", "-f", str(RESERVATION_RBAC))
    # What the NVIDIA GPU operator installs; reservation pods ask for it (KAI's default).
    cluster.kubectl("apply", "-f", "-", stdin="apiVersion: node.k8s.io/v1\nkind: RuntimeClass\n"
                    "metadata: {name: nvidia}\nhandler: nvidia\n")  # fmt: skip
    return sharing.RESERVATION_NAMESPACE


@pytest.fixture
def device_plugin(cluster: Cluster, reservation_namespace: str) -> Iterator[DevicePlugin]:
    reporter_api = _account_client(cluster, reservation_namespace, sharing.RESERVATION_SERVICE_ACCOUNT)
    plugin = DevicePlugin(cluster.core, client.CoreV1Api(reporter_api), {})
    plugin.thread.start()
    yield plugin
    plugin.stop.set()
    plugin.thread.join(timeout=10)
    reporter_api.close()
    assert not plugin.errors, plugin.errors


# ----- the portal -------------------------------------------------------------------------


@pytest.fixture
def portal(portal_backend: KubernetesBackend) -> KubernetesBackend:
    """The portal as the cluster's scheduler, queues team-a and KAI's examples' default-queue."""
    portal_backend.gpu_sharing.allocation_timeout_seconds = 30
    factories.queue("team-a", gpu_quota=16)
    factories.queue("default-queue", gpu_quota=16)
    return portal_backend


def _shared_pod(name: str, scheduler: str, **annotations: str) -> dict[str, Any]:
    return pod_body(name, scheduler, labels={"kai.scheduler/queue": "team-a"}, annotations=annotations)


def _bound(core: client.CoreV1Api, namespace: str, *names: str) -> bool:
    cycle()
    return all(core.read_namespaced_pod(n, namespace).spec.node_name for n in names)


def _reservations(core: client.CoreV1Api, node: str) -> list[client.V1Pod]:
    on_node = f"spec.nodeName={node}"
    pods = core.list_namespaced_pod(sharing.RESERVATION_NAMESPACE, field_selector=on_node).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _configmap(core: client.CoreV1Api, namespace: str, pod: client.V1Pod) -> dict[str, str]:
    """The data of the capabilities ConfigMap the pod's GPU container takes NVIDIA_VISIBLE_DEVICES from."""
    [container] = [c for c in pod.spec.containers if c.env]
    [ref] = [e.value_from.config_map_key_ref for e in container.env if e.name == "NVIDIA_VISIBLE_DEVICES"]
    assert ref.key == "NVIDIA_VISIBLE_DEVICES"
    assert [f.config_map_ref.name for f in container.env_from] == [f"{ref.name}-evar"]
    return dict(core.read_namespaced_config_map(ref.name, namespace).data or {})


def _groups(pod: client.V1Pod) -> set[str]:
    return sharing.group_labels(pod.metadata.labels or {})


# ----- the tests --------------------------------------------------------------------------


def test_fractions_share_a_reserved_gpu_made_visible_through_the_webhook_configmap(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    webhook: str, device_plugin: DevicePlugin,
) -> None:  # fmt: skip
    core = cluster.core
    node = nodes.kwok("share", gpus=4, labels=GPU_MEMORY_LABEL)
    device_plugin.gpus[node] = 4
    for name in ("half-a", "half-b"):
        core.create_namespaced_pod(namespace, _shared_pod(name, scheduler_name, **{"gpu-fraction": "0.5"}))

    wait_until(lambda: _bound(core, namespace, "half-a", "half-b"), "both halves bound", timeout=90,
               every=0.5)  # fmt: skip

    a, b = (core.read_namespaced_pod(n, namespace) for n in ("half-a", "half-b"))
    assert a.spec.node_name == b.spec.node_name == node
    [group] = _groups(a)
    assert _groups(b) == {group}
    [reservation] = _reservations(core, node)
    assert reservation.metadata.labels == {"app": "kai-resource-reservation", "runai-gpu-group": group,
                                           "kai.scheduler/reserved-by": scheduler_name}
    assert reservation.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}
    assert reservation.spec.runtime_class_name == "nvidia"
    assert reservation.spec.containers[0].command == ["python", "-m", "kai_portal.cluster.reservation"]
    gpu = reservation.metadata.annotations[sharing.GPU_INDEX_ANNOTATION]
    assert gpu.startswith(f"GPU-{node}-")
    for pod in (a, b):
        data = _configmap(core, namespace, pod)
        assert data["NVIDIA_VISIBLE_DEVICES"] == gpu and data["GPU_PORTION"] == "0.5"

    # A third half does not fit the full device: a second group, a second reservation, another GPU.
    core.create_namespaced_pod(namespace, _shared_pod("half-c", scheduler_name, **{"gpu-fraction": "0.5"}))
    wait_until(lambda: _bound(core, namespace, "half-c"), "the third half bound", timeout=90, every=0.5)
    c = core.read_namespaced_pod("half-c", namespace)
    reservations = {r.metadata.labels["runai-gpu-group"]: r for r in _reservations(core, node)}
    assert set(reservations) == {group} | _groups(c) and len(reservations) == 2
    other = reservations[next(iter(_groups(c)))].metadata.annotations[sharing.GPU_INDEX_ANNOTATION]
    assert other != gpu and _configmap(core, namespace, c)["NVIDIA_VISIBLE_DEVICES"] == other

    # The last pod of the first group gone: its reservation pod goes too, the other stays.
    for name in ("half-a", "half-b"):
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def first_released() -> bool:
        cycle()
        return {r.metadata.labels["runai-gpu-group"] for r in _reservations(core, node)} == _groups(c)

    wait_until(first_released, "the first reservation pod deleted", timeout=60, every=0.5)


def test_gpu_memory_and_multi_device_fractions(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    webhook: str, device_plugin: DevicePlugin,
) -> None:  # fmt: skip
    core = cluster.core
    node = nodes.kwok("mem", gpus=4, labels=GPU_MEMORY_LABEL)
    device_plugin.gpus[node] = 4
    core.create_namespaced_pod(namespace, _shared_pod("memory", scheduler_name, **{"gpu-memory": "2000"}))
    core.create_namespaced_pod(namespace, _shared_pod(
        "pair", scheduler_name, **{"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}))  # fmt: skip

    wait_until(lambda: _bound(core, namespace, "memory", "pair"), "both pods bound", timeout=90, every=0.5)

    memory = core.read_namespaced_pod("memory", namespace)
    data = _configmap(core, namespace, memory)
    assert data["CUDA_DEVICE_MEMORY_LIMIT"] == "2000m"
    assert data["NVIDIA_VISIBLE_DEVICES"].startswith(f"GPU-{node}-")
    assert data["GPU_PORTION"] == "0.05"  # 2000 of 40960 MiB, rounded up to hundredths

    pair = core.read_namespaced_pod("pair", namespace)
    groups = _groups(pair)
    assert len(groups) == 2 and all(pair.metadata.labels[f"runai-gpu-group/{g}"] == g for g in groups)
    assert len(pair.metadata.annotations["kai.scheduler/gpu-devices"].split(",")) == 2
    assert pair.metadata.annotations["received-resource-type"] == "Fraction"  # KAI's binder's word
    visible = _configmap(core, namespace, pair)["NVIDIA_VISIBLE_DEVICES"].split(",")
    held = {r.metadata.labels["runai-gpu-group"]: r.metadata.annotations[sharing.GPU_INDEX_ANNOTATION]
            for r in _reservations(core, node)}  # fmt: skip
    assert len(set(visible)) == 2 and set(visible) == {held[g] for g in groups}


def test_without_the_webhook_a_fraction_waits_and_says_so(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    reservation_namespace: str,
) -> None:  # fmt: skip
    core = cluster.core
    node = nodes.kwok("nohook", gpus=4, labels=GPU_MEMORY_LABEL)
    core.create_namespaced_pod(namespace, _shared_pod("half", scheduler_name, **{"gpu-fraction": "0.5"}))

    def explained() -> str:
        cycle()
        return Pod.objects.filter(name="half", reason__contains="admission webhook").exists()

    wait_until(explained, "the reason", timeout=60, every=0.5)
    assert core.read_namespaced_pod("half", namespace).spec.node_name is None
    assert not _reservations(core, node)
    half = Pod.objects.get(name="half")
    assert half.state == "pending" and "runai/shared-gpu-configmap" in half.reason
    events = [e for e in core.list_namespaced_event(namespace).items if e.involved_object.name == "half"]
    assert any(e.reason == "FailedBinding" and "admission webhook" in e.message for e in events)


def test_without_the_reservation_namespace_a_fraction_waits_and_says_so(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    webhook: str,
) -> None:  # fmt: skip
    core = cluster.core
    nodes.kwok("nons", gpus=4, labels=GPU_MEMORY_LABEL)
    portal.gpu_sharing.namespace = f"kai-resource-reservation-missing-{secrets.token_hex(3)}"
    core.create_namespaced_pod(namespace, _shared_pod("half", scheduler_name, **{"gpu-fraction": "0.5"}))

    def explained() -> str:
        cycle()
        return Pod.objects.filter(name="half", reason__contains="does not exist").exists()

    wait_until(explained, "the reason", timeout=60, every=0.5)
    assert core.read_namespaced_pod("half", namespace).spec.node_name is None
    assert portal.gpu_sharing.namespace in Pod.objects.get(name="half").reason


@pytest.mark.parametrize("scheduler_name", ["kai-scheduler"])
def test_kai_s_own_gpu_sharing_examples_run_unchanged(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    webhook: str, device_plugin: DevicePlugin, webhook_server: str, webhook_certs: tuple[Path, Path, Path],
) -> None:  # fmt: skip
    """KAI's docs/gpu-sharing examples, applied as they are (schedulerName kai-scheduler, queue
    default-queue); two of them share the pod name, so the second goes to its own namespace."""
    core = cluster.core
    node = nodes.kwok("kai-examples", gpus=4, labels=GPU_MEMORY_LABEL)
    device_plugin.gpus[node] = 4
    second = f"{namespace[:50]}-b"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=second)))
    wait_until(lambda: _has_default_account(core, second), f"the default ServiceAccount in {second}")
    extra_hook = _register_webhook(cluster, webhook_server, webhook_certs[0], scheduler_name, second)
    try:
        placed: dict[tuple[str, str], dict[str, Any]] = {}
        used: set[str] = set()
        for example in GPU_SHARING_EXAMPLES:
            manifest = yaml.safe_load(kai_file(f"docs/gpu-sharing/{example}"))
            name = manifest["metadata"]["name"]
            target = namespace if name not in used else second
            used.add(name)

            def created(ns: str = target, body: dict[str, Any] = manifest) -> bool:
                pod = core.create_namespaced_pod(ns, body)
                if sharing.CONFIGMAP_ANNOTATION in (pod.metadata.annotations or {}):
                    return True
                core.delete_namespaced_pod(body["metadata"]["name"], ns, grace_period_seconds=0)
                wait_until(lambda: _gone(core, ns, body["metadata"]["name"]), "the unmutated pod to go")
                return False  # the second namespace's webhook was not active yet

            wait_until(created, f"{example} created and mutated", timeout=60, every=0.5)
            placed[(target, name)] = manifest

        def all_bound() -> bool:
            cycle()
            return all(core.read_namespaced_pod(n, ns).spec.node_name for ns, n in placed)

        wait_until(all_bound, "KAI's examples bound", timeout=120, every=0.5)
        for (ns, name), manifest in placed.items():
            pod = core.read_namespaced_pod(name, ns)
            assert pod.spec.node_name == node
            wanted = manifest["metadata"]["annotations"].get("gpu-fraction-container-name")
            [gpu_container] = [c for c in pod.spec.containers if c.env]
            assert gpu_container.name == (wanted or manifest["spec"]["containers"][0]["name"])
            data = _configmap(core, ns, pod)
            assert data["NVIDIA_VISIBLE_DEVICES"].startswith(f"GPU-{node}-")
            if "gpu-memory" in manifest["metadata"]["annotations"]:
                assert data["CUDA_DEVICE_MEMORY_LIMIT"] == "2000m"
            else:
                assert data["GPU_PORTION"] == "0.5"
        # The portal tracks them under KAI's queue name.
        queues = {p.job.queue.name for p in Pod.objects.filter(name__startswith="gpu-sharing")}
        assert queues == {"default-queue"}
    finally:
        client.AdmissionregistrationV1Api(cluster.api).delete_mutating_webhook_configuration(extra_hook)
        core.delete_namespace(second, propagation_policy="Background")


def test_the_reservation_entrypoint_reports_its_gpu_as_its_own_account(
    cluster: Cluster, reservation_namespace: str, tmp_path: Path
) -> None:
    """``python -m kai_portal.cluster.reservation`` as the reservation pod runs it: no Django,
    its ServiceAccount's token, the downward-API variables and the device plugin's variable."""
    core = cluster.core
    name = f"gpu-reservation-entrypoint-{secrets.token_hex(3)}"
    body = pod_body(name, "nobody")
    core.create_namespaced_pod(reservation_namespace, body)
    account = sharing.RESERVATION_SERVICE_ACCOUNT
    kubeconfig = kubeconfig_for(cluster, reservation_namespace, account, tmp_path / "reservation.kubeconfig")
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "POD_NAME": name,
           "POD_NAMESPACE": reservation_namespace}  # fmt: skip
    entrypoint = [str(REPO / ".venv" / "bin" / "python"), "-m", "kai_portal.cluster.reservation", "--once"]
    try:
        refused = subprocess.run(entrypoint, env={**env, "NVIDIA_VISIBLE_DEVICES": "all"}, cwd=REPO,
                                 capture_output=True, text=True, timeout=120)  # fmt: skip
        assert refused.returncode != 0 and "expected exactly one GPU" in refused.stderr
        done = subprocess.run(entrypoint, env={**env, "NVIDIA_VISIBLE_DEVICES": "GPU-1f2e3d4c"}, cwd=REPO,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        pod = core.read_namespaced_pod(name, reservation_namespace)
        assert pod.metadata.annotations[sharing.GPU_INDEX_ANNOTATION] == "GPU-1f2e3d4c"
    finally:
        core.delete_namespaced_pod(name, reservation_namespace, grace_period_seconds=0)


def test_a_slow_device_plugin_holds_no_cycle_up_and_a_silent_one_is_given_up(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    webhook: str, device_plugin: DevicePlugin,
) -> None:  # fmt: skip
    core = cluster.core
    slow, silent = (nodes.kwok(n, gpus=4, labels=GPU_MEMORY_LABEL) for n in ("slow", "silent"))
    sharing_of = portal.gpu_sharing
    sharing_of.bind_wait_seconds = 0.5
    core.create_namespaced_pod(namespace, _shared_pod("early", scheduler_name, **{"gpu-fraction": "0.5"}))

    def waiting() -> bool:
        cycle()
        return Pod.objects.filter(name="early", reason__contains="waiting for reservation pod").exists()

    wait_until(waiting, "the pod to wait for its reservation", timeout=60, every=0.5)
    early = Pod.objects.get(name="early")
    node = early.reason.split(" on node ")[1].split(" ")[0]
    assert node in (slow, silent) and early.state == "pending"
    [reservation] = _reservations(core, node)
    # Later cycles retry with the same reservation pod, never a second one.
    cycle()
    cycle()
    assert [r.metadata.name for r in _reservations(core, node)] == [reservation.metadata.name]
    assert core.read_namespaced_pod("early", namespace).spec.node_name is None

    device_plugin.gpus[node] = 4  # the device plugin comes up
    wait_until(lambda: _bound(core, namespace, "early"), "the pod bound once its GPU is reported",
               timeout=60, every=0.5)  # fmt: skip
    [same] = _reservations(core, node)
    assert same.metadata.name == reservation.metadata.name
    gpu = same.metadata.annotations[sharing.GPU_INDEX_ANNOTATION]
    data = _configmap(core, namespace, core.read_namespaced_pod("early", namespace))
    assert data["NVIDIA_VISIBLE_DEVICES"] == gpu

    # No device plugin at all on the other node: the reservation is given up after the timeout.
    other = silent if node == slow else slow
    sharing_of.allocation_timeout_seconds = 3
    # (Cordoned, so the pod goes there: the backend does not read nodeSelector yet, issue 16.)
    core.patch_node(node, {"spec": {"unschedulable": True}})
    core.create_namespaced_pod(namespace, _shared_pod("late", scheduler_name, **{"gpu-fraction": "0.75"}))

    def given_up() -> bool:
        cycle()
        return Pod.objects.filter(name="late", reason__contains="did not report its GPU").exists()

    wait_until(given_up, "the reservation given up", timeout=90, every=0.5)
    late = Pod.objects.get(name="late")
    assert "device plugin" in late.reason and other in late.reason and late.state == "pending"
    assert not [r for r in _reservations(core, other) if not r.metadata.annotations]
