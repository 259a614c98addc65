"""The Helm chart renders (``helm template``) into the objects a cluster install needs, wired to the
project: commands, probes and variables that exist, and a ClusterRole that is exactly what the
Kubernetes backend calls. Applying it to a real API server is the cluster suite's job."""

from __future__ import annotations

import ast
import base64
import os
import re
import shutil
import subprocess
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from django.core.management import get_commands

from kai_portal.cluster.backends.kubernetes.cache import POD_GROUP_API
from kai_portal.cluster.backends.kubernetes.client import HotWrites
from kai_portal.cluster.backends.kubernetes.gpu_sharing import RESERVATION_NAMESPACE
from kai_portal.cluster.backends.kubernetes.owners import CUSTOM_OWNERS
from kai_portal.cluster.backends.kubernetes.pod_grouping import BUILTIN_PRIORITIES
from kai_portal.cluster.webhook import WEBHOOK_PATH
from kai_portal.monitoring.middleware import ENDPOINTS
from kai_portal.queues import kai_yaml
from tests.deploy.test_compose import SERVICES, settings_env_names
from tests.kai_examples import kai_file
from tests.portal import factories

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kai-portal"
KUBERNETES = ROOT / "kai_portal" / "cluster" / "backends" / "kubernetes"
# The worker's and web pods' calls: every component of the Kubernetes backend but the Lease (its own
# Role), the Queue objects (their own rules, below) and the reservation pods' entrypoint.
BACKENDS = sorted(
    p for p in KUBERNETES.glob("*.py") if p.name not in ("lease.py", "queue_objects.py", "reservation.py")
)
# Leader election's calls: a namespaced Role in the worker's namespace, not the ClusterRole.
LEADER_ELECTION = [KUBERNETES / "lease.py"]
REQUIRED = [
    "secretKey=test-secret",
    "databaseUrl=postgres://kai:pw@db:5432/kai",
    "redisUrl=redis://redis:6379/0",
]


def find_helm() -> str | None:
    """$HELM, else helm on PATH or next to the Python (``make helm``), else Go's bin directory."""
    candidates = [os.environ.get("HELM"), shutil.which("helm"), str(ROOT / ".venv" / "bin" / "helm")]
    gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
    candidates.append(str(Path(gopath) / "bin" / "helm"))
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


HELM = find_helm()
pytestmark = pytest.mark.skipif(
    HELM is None, reason="helm is not installed: `make helm` builds it from its Go module"
)


def render(*settings: str, ok: bool = True) -> Any:
    args = [HELM, "template", "kai", str(CHART), "--namespace", "kai-system", "--kube-version", "1.31.0"]
    for setting in settings:
        args += ["--set", setting]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if not ok:
        assert done.returncode != 0, "rendering should have failed"
        return done.stderr
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def container(doc: dict) -> dict:
    (only,) = doc["spec"]["template"]["spec"]["containers"]
    return only


API_GROUPS = {"core": "", "batch": "batch", "apps": "apps", "scheduling": "scheduling.k8s.io",
              "coordination": "coordination.k8s.io"}  # fmt: skip
# Client names that are one word in a resource name (the rest of "_" marks a subresource).
COMPOUND_KINDS = {"config_map": "configmap", "replica_set": "replicaset", "stateful_set": "statefulset",
                  "cron_job": "cronjob", "priority_class": "priorityclass"}  # fmt: skip


CLIENT_VERBS = {"list": "list", "create": "create", "delete": "delete", "patch": "patch", "read": "get",
                "replace": "update"}  # fmt: skip


def resource_call(api: str, method: str) -> tuple[str, str, str]:
    """``(API group, resource, verb)`` of one typed client method, e.g. ``core.create_namespaced_pod``."""
    match = re.fullmatch(
        r"(list|create|delete|patch|read|replace)_(?:namespaced_)?(\w+?)(?:_for_all_namespaces)?", method
    )
    assert match, f"unknown client call {api}.{method}"
    name = match.group(2)
    for compound, word in COMPOUND_KINDS.items():
        name = name.replace(compound, word)
    kind, *sub = name.split("_")
    resource = kind + ("es" if kind.endswith("s") else "s") + "".join(f"/{s}" for s in sub)
    return API_GROUPS[api], resource, CLIENT_VERBS[match.group(1)]


def backend_calls(paths: list[Path] = BACKENDS) -> set[tuple[str, str, str]]:
    """``(API group, resource, verb)`` of every client call in ``paths`` (``self.core`` is
    CoreV1Api, ``self.batch`` BatchV1Api, ``self.apps`` AppsV1Api, ``self.scheduling``
    SchedulingV1Api, ``self.coordination`` CoordinationV1Api; ``self.custom`` CustomObjectsApi
    reads the owner kinds of owners.py and lists KAI's PodGroups); what ``Lister.sync`` lists it also
    watches."""
    sources = [path.read_text() for path in paths]
    methods = {
        m
        for source in sources
        for m in re.findall(r"self\.(core|batch|apps|scheduling|coordination)\.(\w+)", source)
    }
    # client.HotWrites sends the requests of CoreV1Api methods without calling them
    for source in sources:
        for write in re.findall(r"self\.writes\.(\w+)\(", source):
            assert write in HotWrites.GENERATED, f"HotWrites.{write} names no CoreV1Api method"
            methods.add(("core", HotWrites.GENERATED[write]))
    watched = {
        arg.attr
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sync"
        for arg in node.args
        if isinstance(arg, ast.Attribute)
        and isinstance(arg.value, ast.Attribute)
        and arg.value.attr in API_GROUPS
    }
    found = methods and (watched or paths != BACKENDS)
    assert found, f"the client calls in {[p.name for p in paths]} could not be found; has a file moved?"
    calls = set()
    for api, method in methods:
        group, resource, verb = resource_call(api, method)
        calls.add((group, resource, verb))
        if method in watched:
            calls.add((group, resource, "watch"))
    custom = {m for source in sources for m in re.findall(r"self\.custom\.(\w+)", source)}
    writes = {m for m in custom if CUSTOM_WRITE.fullmatch(m)}
    assert custom - writes <= {"get_namespaced_custom_object", "list_cluster_custom_object"}, custom
    calls |= custom_write_calls(paths)
    if "get_namespaced_custom_object" in custom:  # owners of the kinds KAI groups by
        calls |= {(group, plural, "get") for (group, _), plural in CUSTOM_OWNERS.items()}
    if "list_cluster_custom_object" in custom:  # KAI's PodGroups, listed and watched
        group, _, plural = POD_GROUP_API
        calls |= {(group, plural, "list"), (group, plural, "watch")}
    return calls


# The cycle's writes of KAI's objects (pod_groups.py, queue_status.py): the group and plural are
# the call's own arguments, read as the module's constants.
CUSTOM_WRITE = re.compile(r"(create|patch)_(namespaced|cluster)_custom_object(_status)?")


def module_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` and ``A, B = "x", "y"``."""
    constants: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs = list(zip(target.elts, value.elts, strict=True))
        else:
            pairs = [(target, value)]
        for name, constant in pairs:
            if isinstance(name, ast.Name) and isinstance(constant, ast.Constant):
                constants[name.id] = constant.value
    return constants


def custom_write_calls(paths: list[Path]) -> set[tuple[str, str, str]]:
    """``(API group, resource, verb)`` of each ``self.custom.<create|patch>_*_custom_object[_status]``
    call in ``paths``; a call whose group or plural is not a module constant fails here."""
    calls = set()
    for path in paths:
        tree = ast.parse(path.read_text())
        constants = module_constants(tree)
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else None
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                    and func.value.attr == "custom"):  # fmt: skip
                continue
            match = CUSTOM_WRITE.fullmatch(func.attr)
            if not match:
                continue
            plural_at = 3 if match.group(2) == "namespaced" else 2
            args = node.args  # type: ignore[attr-defined]
            group, plural = (constants[a.id] for a in (args[0], args[plural_at]))
            calls.add((group, plural + ("/status" if match.group(3) else ""), match.group(1)))
    return calls


QUEUE_OBJECTS = KUBERNETES / "queue_objects.py"
# The methods of QueueObjects that read for the cycle: observe, and the list call its informer and
# its watch windows share (a list followed by a watch).
READS = frozenset({"observe", "_list_call"})
CUSTOM_VERBS = {"list": "list", "get": "get", "create": "create", "patch": "patch", "replace": "update",
                "delete": "delete"}  # fmt: skip


def queue_object_calls() -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """``(API group, resource, verb)`` of the ``CustomObjectsApi`` calls (``self.custom``) in
    ``queue_objects.py``: (those of ``observe``, which the worker's cycle makes, listing and
    watching; those of every other method, which the web pods make when a queue is edited).

    The group and resource are the call's own arguments, read as the module's constants, so a
    call on another kind of object (or with a literal) needs its own rule and fails here first."""
    tree = ast.parse(QUEUE_OBJECTS.read_text())
    constants: dict[str, str] = {}
    for node in tree.body:  # module-level NAME = "text" and A, B = "x", "y"
        if not isinstance(node, ast.Assign):
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            pairs = list(zip(target.elts, value.elts, strict=True))
        else:
            pairs = [(target, value)]
        for name, constant in pairs:
            if isinstance(name, ast.Name) and isinstance(constant, ast.Constant):
                constants[name.id] = constant.value
    reads: set[tuple[str, str, str]] = set()
    writes: set[tuple[str, str, str]] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            # self.custom.<method>(GROUP, VERSION, PLURAL, ...) or partial(self.custom.<method>, GROUP, ...)
            if not isinstance(node, ast.Call):
                continue
            method, args = node.func, node.args
            if isinstance(method, ast.Name) and method.id == "partial" and args:
                method, args = args[0], args[1:]
            if not (isinstance(method, ast.Attribute) and isinstance(method.value, ast.Attribute)
                    and method.value.attr == "custom"):  # fmt: skip
                continue
            match = re.fullmatch(r"(list|get|create|patch|replace|delete)_cluster_custom_object", method.attr)
            assert match, f"unknown client call custom.{method.attr}"
            group, plural = (constants[a.id] for a in (args[0], args[2]))  # type: ignore[attr-defined]
            verb = CUSTOM_VERBS[match.group(1)]
            target = reads if function.name in READS else writes
            target.add((group, plural, verb))
            if function.name in READS and verb == "list":
                target.add((group, plural, "watch"))  # observe() follows its list with a watch
    assert reads and writes, "the Queue object calls could not be found; has queue_objects.py moved?"
    return reads, writes


# The KubernetesBackend methods the web pods call in a request (workloads/cluster_jobs.py).
WEB_METHODS = ("submit", "create_namespace", "label_namespace", "cancel")


def portal_job_calls() -> set[tuple[str, str, str]]:
    """``(API group, resource, verb)`` of the client calls in the backend's submit / cancel /
    create_namespace, which the web pods make for a portal job."""
    tree = ast.parse((KUBERNETES / "portal_jobs.py").read_text())
    methods = {
        node.attr
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef) and function.name in WEB_METHODS
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "core"  # fmt: skip
    }
    assert methods, "submit / cancel make no calls; has portal_jobs.py moved?"
    return {resource_call("core", method) for method in methods}


def worker_calls() -> set[tuple[str, str, str]]:
    """The worker's account: the backends' calls (but a job namespace's creation, the web's) and
    the cycle's Queue object reads."""
    return (backend_calls() - OPTIONAL_CALLS) | queue_object_calls()[0]


def web_calls() -> set[tuple[str, str, str]]:
    """The web pods' account: Queue object writes and the portal jobs' pods."""
    return queue_object_calls()[1] | portal_job_calls()


def granted_by(role: dict) -> set[tuple[str, str, str]]:
    granted = set()
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        assert "nonResourceURLs" not in rule
        granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return granted


# Granted only where the operator allows it (JOB_NAMESPACE_CREATE / config.createJobNamespaces).
OPTIONAL_CALLS = {("", "namespaces", "create"), ("", "namespaces", "patch")}


def cluster_role(path: Path) -> dict:
    (role,) = [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ClusterRole"]
    return role


def test_the_plain_rbac_manifest_grants_the_same_as_the_chart():
    """deploy/rbac/ (kubectl apply, the cluster tests' ServiceAccounts) and the chart stay the same roles;
    deploy/rbac/optional/ adds the namespace creation the web pods may be allowed."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "rbac" / "kai-portal.yaml").read_text())
    roles = {d["metadata"]["name"]: d for d in docs if d and d["kind"] == "ClusterRole"}
    assert set(roles) == {"kai-portal-scheduler", "kai-portal-web"}
    assert granted_by(roles["kai-portal-scheduler"]) == worker_calls()
    assert granted_by(roles["kai-portal-web"]) == web_calls() - OPTIONAL_CALLS
    optional = cluster_role(ROOT / "deploy" / "rbac" / "optional" / "kai-portal-namespaces.yaml")
    assert granted_by(optional) == OPTIONAL_CALLS
    # Leases only in the portal's own namespace, through a Role.
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "rbac" / "kai-portal.yaml").read_text()) if d]
    (lease_role,) = [d for d in docs if d["kind"] == "Role"]
    assert lease_role["metadata"]["namespace"] == "kai-portal"
    assert granted_by(lease_role) == backend_calls(LEADER_ELECTION) == {
        ("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}  # fmt: skip
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
    assert binding["roleRef"]["name"] == lease_role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kai-portal", "namespace": "kai-portal"}]  # fmt: skip


def test_default_install_renders_every_component():
    docs = render(*REQUIRED)
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == [
        ("ClusterRole", "kai-kai-portal"),
        ("ClusterRole", "kai-kai-portal-web"),
        ("ClusterRoleBinding", "kai-kai-portal"),
        ("ClusterRoleBinding", "kai-kai-portal-web"),
        ("ConfigMap", "kai-kai-portal"),
        ("Deployment", "kai-kai-portal-beat"),
        ("Deployment", "kai-kai-portal-scheduler"),
        ("Deployment", "kai-kai-portal-web"),
        ("Deployment", "kai-kai-portal-webhook"),
        ("Deployment", "kai-kai-portal-worker"),
        ("Job", "kai-kai-portal-migrate"),
        ("MutatingWebhookConfiguration", "kai-kai-portal-gpu-sharing"),
        ("Namespace", "kai-resource-reservation"),
        ("PriorityClass", "build"),
        ("PriorityClass", "build-preemptible"),
        ("PriorityClass", "inference"),
        ("PriorityClass", "train"),
        ("Role", "kai-kai-portal-leader-election"),
        ("Role", "kai-resource-reservation"),
        ("RoleBinding", "kai-kai-portal-leader-election"),
        ("RoleBinding", "kai-resource-reservation"),
        ("Secret", "kai-kai-portal"),
        ("Secret", "kai-kai-portal-webhook-tls"),
        ("Service", "kai-kai-portal"),
        ("Service", "kai-kai-portal-webhook"),
        ("ServiceAccount", "kai-kai-portal"),
        ("ServiceAccount", "kai-kai-portal-web"),
        ("ServiceAccount", "kai-resource-reservation"),
    ]
    without = sorted(
        (d["kind"], d["metadata"]["name"]) for d in render(*REQUIRED, "gpuSharing.enabled=false")
    )
    assert without == [k for k in kinds if "webhook" not in k[1] and "gpu-sharing" not in k[1]
                       and "reservation" not in k[1]]  # fmt: skip


def test_the_cluster_role_is_exactly_what_the_backend_calls_and_no_wildcard():
    objects = by_kind(render(*REQUIRED))
    role = objects[("ClusterRole", "kai-kai-portal")]
    assert granted_by(role) == worker_calls()
    binding = objects[("ClusterRoleBinding", "kai-kai-portal")]
    assert binding["roleRef"]["name"] == "kai-kai-portal"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kai-kai-portal", "namespace": "kai-system"}
    ]
    # Leader election: a Role for Leases in the release's namespace, which the worker is told.
    lease_role = objects[("Role", "kai-kai-portal-leader-election")]
    assert lease_role["metadata"]["namespace"] == "kai-system"
    assert granted_by(lease_role) == backend_calls(LEADER_ELECTION)
    lease_binding = objects[("RoleBinding", "kai-kai-portal-leader-election")]
    assert lease_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                        "name": "kai-kai-portal-leader-election"}  # fmt: skip
    assert lease_binding["subjects"] == binding["subjects"]
    assert objects[("ConfigMap", "kai-kai-portal")]["data"]["LEADER_ELECTION_NAMESPACE"] == "kai-system"
    # The web pods' account: the Queue object writes of a portal edit and the portal jobs' pods;
    # a missing job namespace is created only where config.createJobNamespaces allows it.
    assert granted_by(objects[("ClusterRole", "kai-kai-portal-web")]) == web_calls() - OPTIONAL_CALLS
    allowed = by_kind(render(*REQUIRED, "config.createJobNamespaces=true"))
    assert granted_by(allowed[("ClusterRole", "kai-kai-portal-web")]) == web_calls()
    assert granted_by(allowed[("ClusterRole", "kai-kai-portal")]) == worker_calls()
    assert allowed[("ConfigMap", "kai-kai-portal")]["data"]["JOB_NAMESPACE_CREATE"] == "1"
    binding = objects[("ClusterRoleBinding", "kai-kai-portal-web")]
    assert binding["roleRef"]["name"] == "kai-kai-portal-web"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kai-kai-portal-web", "namespace": "kai-system"}
    ]


def test_commands_match_the_project_and_only_the_worker_and_web_hold_tokens():
    objects = by_kind(render(*REQUIRED))
    web, worker, beat, scheduler = (
        objects[("Deployment", f"kai-kai-portal-{c}")] for c in ("web", "worker", "beat", "scheduler")
    )
    migrate = objects[("Job", "kai-kai-portal-migrate")]

    assert container(web)["command"] == ["gunicorn", "kai_portal.wsgi:application"]
    compose_worker = SERVICES["worker"]["command"]
    queues = compose_worker[compose_worker.index("--queues") + 1]
    assert container(worker)["command"] == ["celery", "-A", "kai_portal", "worker"]
    assert f"--queues={queues}" in container(worker)["args"]
    assert container(beat)["command"] == ["celery", "-A", "kai_portal", "beat"]
    # kubernetes mode: the scheduler process runs the cycles (and beat sends none); simulated: no such pod.
    assert container(scheduler)["command"] == ["python", "manage.py", "run_scheduler"]
    assert "run_scheduler" in get_commands()
    assert objects[("ConfigMap", "kai-kai-portal")]["data"]["SCHEDULING_LOOP"] == "process"
    assert container(migrate)["command"][:3] == ["python", "manage.py", "migrate"]
    assert migrate["metadata"]["annotations"]["helm.sh/hook"] == "post-install,pre-upgrade"

    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
    pods = {"web": web, "worker": worker, "beat": beat, "migrate": migrate, "scheduler": scheduler}
    tokens = {name: d["spec"]["template"]["spec"]["automountServiceAccountToken"] for name, d in pods.items()}
    # The web writes Queue objects and creates and deletes portal jobs' pods in the request
    # (kubernetes mode only), with its own account, not the scheduler's.
    assert tokens == {"web": True, "worker": True, "beat": False, "migrate": False, "scheduler": True}
    accounts = {name: d["spec"]["template"]["spec"]["serviceAccountName"] for name, d in pods.items()}
    assert accounts["web"] == "kai-kai-portal-web" and accounts["worker"] == "kai-kai-portal"
    assert accounts["scheduler"] == "kai-kai-portal"
    simulated = by_kind(render(*REQUIRED, "config.clusterBackend=simulated"))
    assert ("Deployment", "kai-kai-portal-scheduler") not in simulated
    assert simulated[("ConfigMap", "kai-kai-portal")]["data"]["SCHEDULING_LOOP"] == "celery"
    assert simulated[("Deployment", "kai-kai-portal-web")]["spec"]["template"]["spec"][
        "automountServiceAccountToken"] is False  # fmt: skip
    for doc in (web, worker, beat, migrate, scheduler):
        spec = doc["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert container(doc)["securityContext"]["readOnlyRootFilesystem"] is True
        assert {m["mountPath"] for m in container(doc)["volumeMounts"]} == {"/tmp", "/app/var"}


def test_scheduler_pools_run_one_scheduler_deployment_per_pool_with_the_same_account():
    """Shards (issue 30): ``scheduler.pools`` renders one Deployment per node pool running
    ``run_scheduler --pool NAME`` (KAI's one scheduler per SchedulingShard), with selectors that
    never overlap, the scheduler's own ServiceAccount and RBAC, and SCHEDULING_SHARDS=1; two pools
    whose Deployment names would collide fail the render, naming both."""
    plain = by_kind(render(*REQUIRED))
    objects = by_kind(render(*REQUIRED, "scheduler.pools={a,Gpu_H100}"))
    assert ("Deployment", "kai-kai-portal-scheduler") not in objects
    per_pool = {
        pool: objects[("Deployment", f"kai-kai-portal-scheduler-{suffix}")]
        for pool, suffix in (("a", "a"), ("Gpu_H100", "gpu-h100"))
    }
    whole = plain[("Deployment", "kai-kai-portal-scheduler")]
    assert "--pool" not in container(whole)["livenessProbe"]["exec"]["command"]
    for pool, doc in per_pool.items():
        assert container(doc)["command"] == ["python", "manage.py", "run_scheduler", "--pool", pool]
        # Its liveness counts its own pool's cycles only: another pool's never keep it alive.
        probe = container(doc)["livenessProbe"]["exec"]["command"]
        assert probe == ["python", "manage.py", "worker_health", "--max-age-cycles", "6", "--pool", pool]
        selector = doc["spec"]["selector"]["matchLabels"]
        assert selector["kai.scheduler/node-pool"] == pool
        assert doc["spec"]["template"]["metadata"]["labels"]["kai.scheduler/node-pool"] == pool
        spec, whole_spec = doc["spec"]["template"]["spec"], whole["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == whole_spec["serviceAccountName"] == "kai-kai-portal"
        assert container(doc)["envFrom"] == container(whole)["envFrom"]
    assert objects[("ConfigMap", "kai-kai-portal")]["data"]["SCHEDULING_SHARDS"] == "1"
    assert plain[("ConfigMap", "kai-kai-portal")]["data"]["SCHEDULING_SHARDS"] == "0"
    # RBAC unchanged: the same roles, rules and bindings with or without pools.
    rbac = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    assert {k: v for k, v in objects.items() if k[0] in rbac} == {
        k: v for k, v in plain.items() if k[0] in rbac
    }
    refused = render(*REQUIRED, "scheduler.pools={a_b,a.b}", ok=False)
    assert '"a_b" and "a.b" both make the Deployment kai-kai-portal-scheduler-a-b; rename one pool' in refused


def test_probes_call_endpoints_and_commands_that_exist():
    objects = by_kind(render(*REQUIRED))
    web = container(objects[("Deployment", "kai-kai-portal-web")])
    ports = {p["name"] for p in web["ports"]}
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe"):
        assert web[probe]["httpGet"]["path"] in ENDPOINTS and web[probe]["httpGet"]["port"] in ports
    worker = container(objects[("Deployment", "kai-kai-portal-worker")])
    command = worker["livenessProbe"]["exec"]["command"]
    assert command[:3] == ["python", "manage.py", "worker_health"] and command[2] in get_commands()
    assert command[3:] == ["--max-age-cycles", "6"]
    annotations = objects[("Deployment", "kai-kai-portal-web")]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics" and "/metrics" in ENDPOINTS


def test_every_variable_the_chart_sets_is_read_by_the_settings():
    objects = by_kind(render(*REQUIRED, "metricsToken=scrape-me", "config.extraEnv.REASON_RETENTION_DAYS=7"))
    config = objects[("ConfigMap", "kai-kai-portal")]["data"]
    secret = objects[("Secret", "kai-kai-portal")]["stringData"]
    assert set(config) | set(secret) <= settings_env_names()
    assert config["CLUSTER_BACKEND"] == "kubernetes" and config["SCHEDULER_NAME"] == "kai-scheduler"
    assert (
        config["CYCLE_SECONDS"] == "5" and config["DEBUG"] == "0" and config["REASON_RETENTION_DAYS"] == "7"
    )
    assert secret == {
        "SECRET_KEY": "test-secret",
        "DATABASE_URL": "postgres://kai:pw@db:5432/kai",
        "REDIS_URL": "redis://redis:6379/0",
        "METRICS_TOKEN": "scrape-me",
    }
    for component in ("web", "worker", "beat", "scheduler"):
        env_from = container(objects[("Deployment", f"kai-kai-portal-{component}")])["envFrom"]
        assert env_from == [
            {"configMapRef": {"name": "kai-kai-portal"}},
            {"secretRef": {"name": "kai-kai-portal"}},
        ]


def test_values_a_user_must_set_fail_clearly_and_an_existing_secret_replaces_them():
    assert "set secretKey" in render("databaseUrl=x", "redisUrl=y", ok=False)
    assert "set databaseUrl" in render("secretKey=x", "redisUrl=y", ok=False)
    assert "set redisUrl" in render("secretKey=x", "databaseUrl=y", ok=False)

    objects = by_kind(render("existingSecret=my-portal-secrets"))
    # Only the webhook's TLS Secret is made (the chart's own CA, not a user's value).
    assert [key for key in objects if key[0] == "Secret"] == [("Secret", "kai-kai-portal-webhook-tls")]
    worker = container(objects[("Deployment", "kai-kai-portal-worker")])
    assert {"secretRef": {"name": "my-portal-secrets"}} in worker["envFrom"]


def test_trial_services_ingress_and_service_monitor_are_wired_together():
    objects = by_kind(render(
        "secretKey=x", "trial.postgresql.enabled=true", "trial.redis.enabled=true", "ingress.enabled=true",
        "metrics.serviceMonitor.enabled=true", "metricsToken=t", "config.cycleSeconds=10", "web.replicas=3",
    ))  # fmt: skip
    secret = objects[("Secret", "kai-kai-portal")]["stringData"]
    db_host = re.search(r"@([^:/]+):(\d+)/", secret["DATABASE_URL"])
    assert db_host and ("Service", db_host.group(1)) in objects
    assert objects[("Service", db_host.group(1))]["spec"]["ports"][0]["port"] == int(db_host.group(2))
    redis_host = re.search(r"redis://([^:/]+):(\d+)/", secret["REDIS_URL"])
    assert redis_host and ("Service", redis_host.group(1)) in objects
    assert ("Deployment", "kai-kai-portal-postgresql") in objects
    assert objects[("ConfigMap", "kai-kai-portal")]["data"]["CYCLE_SECONDS"] == "10"
    assert objects[("Deployment", "kai-kai-portal-web")]["spec"]["replicas"] == 3

    service = objects[("Service", "kai-kai-portal")]
    ingress = objects[("Ingress", "kai-kai-portal")]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert (
        backend["name"] == "kai-kai-portal" and backend["port"]["name"] == service["spec"]["ports"][0]["name"]
    )
    monitor = objects[("ServiceMonitor", "kai-kai-portal")]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["authorization"]["credentials"] == {"name": "kai-kai-portal", "key": "METRICS_TOKEN"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()


def openapi_to_jsonschema(schema: Any) -> Any:
    """Drop Kubernetes' ``x-kubernetes-*`` extensions so a CRD schema is plain JSON Schema."""
    if isinstance(schema, dict):
        return {k: openapi_to_jsonschema(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if isinstance(schema, list):
        return [openapi_to_jsonschema(v) for v in schema]
    return schema


def test_kais_priority_classes_are_installed_with_kais_values_unless_turned_off():
    """KAI's chart installs train/build-preemptible/build/inference; without them the API server
    refuses a pod naming one in spec.priorityClassName. Same names and values as KAI's templates
    and as the portal's built-ins (used when the cluster has no such class)."""
    classes = {d["metadata"]["name"]: d for d in render(*REQUIRED) if d["kind"] == "PriorityClass"}
    assert {name: d["value"] for name, d in classes.items()} == BUILTIN_PRIORITIES
    for name, doc in classes.items():
        template = kai_file(f"deployments/kai-scheduler/templates/priorityclasses/{name}.yaml")
        kai = yaml.safe_load("\n".join(ln for ln in template.splitlines() if not ln.startswith("{{")))
        fields = ("apiVersion", "kind", "value")
        assert [doc[k] for k in fields] == [kai[k] for k in fields]
        assert not doc.get("globalDefault")
    turned_off = render(*REQUIRED, "defaultPriorityClasses.enabled=false")
    assert not [d for d in turned_off if d["kind"] == "PriorityClass"]


@pytest.mark.django_db
def test_the_kai_crds_have_kais_names_and_accept_the_portals_queue_yaml():
    args = [HELM, "template", "kai", str(CHART), "--kube-version", "1.31.0", "--include-crds"]
    for setting in REQUIRED:
        args += ["--set", setting]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    crds = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all(done.stdout)
        if d and d["kind"] == "CustomResourceDefinition"
    }
    assert set(crds) == {"queues.scheduling.run.ai", "podgroups.scheduling.run.ai"}
    queue_crd, pg_crd = crds["queues.scheduling.run.ai"]["spec"], crds["podgroups.scheduling.run.ai"]["spec"]
    assert (queue_crd["group"], queue_crd["names"]["kind"], queue_crd["scope"]) == (
        "scheduling.run.ai",
        "Queue",
        "Cluster",
    )
    assert [v["name"] for v in queue_crd["versions"]] == ["v2"]
    assert (pg_crd["names"]["kind"], pg_crd["scope"], pg_crd["names"]["shortNames"]) == (
        "PodGroup",
        "Namespaced",
        ["pg"],
    )
    assert [v["name"] for v in pg_crd["versions"]] == ["v2alpha2"]

    # The portal's own Queue YAML export (what `manage.py export_queues` writes) fits the CRD.
    dept = factories.queue(
        "research", display_name="Research", gpu_quota=16, gpu_limit=24, cpu_quota=64_000,
        memory_quota=262_144, priority=120, reclaim_min_runtime=timedelta(minutes=10),
    )  # fmt: skip
    factories.queue("vision", parent=dept, gpu_quota=Decimal("4.5"), gpu_over_quota_weight=2)
    schema = openapi_to_jsonschema(queue_crd["versions"][0]["schema"]["openAPIV3Schema"])
    documents = list(yaml.safe_load_all(kai_yaml.export_queues()))
    assert len(documents) == 2
    for document in documents:
        assert document["apiVersion"] == "scheduling.run.ai/v2" and document["kind"] == "Queue"
        jsonschema.validate(document, schema)
    # and a typo'd field type is refused, so the check is not vacuous
    bad = {**documents[0], "spec": {**documents[0]["spec"], "priority": "high"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)

    pg_schema = openapi_to_jsonschema(pg_crd["versions"][0]["schema"]["openAPIV3Schema"])
    jsonschema.validate(
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "train"},
         "spec": {"minMember": 4, "queue": "vision", "preemptibility": "non-preemptible",
                  "subGroups": [{"name": "workers", "minMember": 2}]}},
        pg_schema,
    )  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": {"preemptibility": "sometimes"}}, pg_schema)


def test_the_gpu_sharing_webhook_is_served_over_tls_and_registered_for_pod_creation(tmp_path: Path) -> None:
    objects = by_kind(render(*REQUIRED))
    hook = objects[("MutatingWebhookConfiguration", "kai-kai-portal-gpu-sharing")]
    (webhook,) = hook["webhooks"]
    service_ref = webhook["clientConfig"]["service"]
    service = objects[("Service", service_ref["name"])]
    assert service_ref["namespace"] == "kai-system" and service_ref["path"] == WEBHOOK_PATH
    (port,) = service["spec"]["ports"]
    assert service_ref["port"] == port["port"]
    deployment = objects[("Deployment", "kai-kai-portal-webhook")]
    server = container(deployment)
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert port["targetPort"] in {p["name"] for p in server["ports"]}
    assert server["command"] == ["gunicorn", "kai_portal.wsgi:application"]
    assert {"--certfile=/tls/tls.crt", "--keyfile=/tls/tls.key"} <= set(server["args"])
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert webhook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"], "scope": "Namespaced"}]  # fmt: skip
    assert webhook["admissionReviewVersions"] == ["v1"] and webhook["sideEffects"] == "None"
    (condition,) = webhook["matchConditions"]
    assert condition["expression"].startswith("object.spec.schedulerName == 'kai-scheduler' && ")
    excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert {"kai-system", "kai-resource-reservation", "kube-system"} == set(excluded)

    # The registered CA signed the certificate the server presents, for the Service's DNS name.
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    secret = objects[("Secret", volumes["tls"]["secret"]["secretName"])]
    ca, crt = tmp_path / "ca.crt", tmp_path / "tls.crt"
    ca.write_bytes(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    crt.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    dns = f"{service_ref['name']}.kai-system.svc"
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(ca), "-verify_hostname", dns, str(crt)],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
    assert verified.returncode == 0, verified.stderr + verified.stdout

    # Reservation pods: the portal's image, KAI's namespace, an account that may annotate them.
    config = objects[("ConfigMap", "kai-kai-portal")]["data"]
    assert (
        config["GPU_SHARING_RESERVATION_IMAGE"]
        == container(objects[("Deployment", "kai-kai-portal-worker")])["image"]
    )
    assert (
        config["GPU_SHARING_NAMESPACE"] == RESERVATION_NAMESPACE
        and config["GPU_SHARING_RUNTIME_CLASS"] == "nvidia"
    )
    role = objects[("Role", "kai-resource-reservation")]
    assert role["metadata"]["namespace"] == RESERVATION_NAMESPACE
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}]

    # A certificate of one's own: its Secret and CA bundle are used, no self-signed Secret is made.
    objects = by_kind(
        render(*REQUIRED, "gpuSharing.webhook.tlsSecret=my-tls", "gpuSharing.webhook.caBundle=Q0E=")
    )
    assert ("Secret", "kai-kai-portal-webhook-tls") not in objects
    (webhook,) = objects[("MutatingWebhookConfiguration", "kai-kai-portal-gpu-sharing")]["webhooks"]
    assert webhook["clientConfig"]["caBundle"] == "Q0E="
    assert "set gpuSharing.webhook.caBundle" in render(
        *REQUIRED, "gpuSharing.webhook.tlsSecret=my-tls", ok=False
    )


def test_the_client_address_is_read_through_the_ingress_by_default():
    """Behind an ingress every request comes from the ingress's address; with NUM_PROXIES unset
    one client's failed tokens or passwords throttled or locked out every client (issue 26)."""
    config = by_kind(render(*REQUIRED))[("ConfigMap", "kai-kai-portal")]["data"]
    assert config["NUM_PROXIES"] == "1"
    direct = by_kind(render(*REQUIRED, "config.numProxies=0"))[("ConfigMap", "kai-kai-portal")]["data"]
    assert direct["NUM_PROXIES"] == "0"


def test_metrics_and_the_api_schema_are_closed_unless_the_values_open_them():
    config = by_kind(render(*REQUIRED))[("ConfigMap", "kai-kai-portal")]["data"]
    assert (config["DEBUG"], config["METRICS_PUBLIC"], config["API_SCHEMA_PUBLIC"]) == ("0", "0", "0")
    opened = by_kind(render(*REQUIRED, "metrics.public=true", "config.apiSchemaPublic=true"))
    data = opened[("ConfigMap", "kai-kai-portal")]["data"]
    assert (data["METRICS_PUBLIC"], data["API_SCHEMA_PUBLIC"]) == ("1", "1")
