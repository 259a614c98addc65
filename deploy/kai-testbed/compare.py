#!/usr/bin/env python3
"""Apply one scenario to the test cluster, wait for the scheduler to settle, and dump what a user
and KAI's tooling would see, normalised so that two runs (KAI's and the portal's) can be compared.

    compare.py run SCENARIO.yaml [--kai-src PATH] [--out FILE] [--label NAME] [--keep]
    compare.py diff A.yaml B.yaml

``run`` does not care which scheduler answers: start KAI (``make kai-up``) or the portal's loop
on the cluster, never both. It cleans what the scenario made before applying it (and after,
unless ``--keep``), so runs start alike. The view (docs/kai-parity.md) has four parts:

- ``pods``: for each pod of the scenario's namespace, its node, phase, conditions, labels and
  annotations as flattened field paths;
- ``podgroups`` and ``queues``: every field path of ``kubectl get podgroups/queues -o yaml``
  and its value;
- ``events``: (involved object, type, reason, source, message), each once, sorted.

Volatile values are masked (UIDs, also inside names; timestamps; resourceVersion; the
last-applied annotation) and managedFields shrink to who wrote what, so the same outcome dumps
the same text. ``diff`` lists paths only one side has and values that differ; exit 1 if any.

KUBECONFIG defaults to ``$K8S_DIR/admin.kubeconfig`` (K8S_DIR default var/k8s); kubectl is the
control plane's own (``$K8S_DIR/bin-dir``). Run it with the project's Python (PyYAML).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
UID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
MASK_UID, MASK_TIME, MASK_VALUE = "<uid>", "<time>", "<masked>"
# Keys whose values change from run to run whatever the scheduler does, and their masks (kubectl's
# last-applied annotation repeats the manifest, with the run's namespace in it).
VOLATILE_KEYS = {
    "uid": MASK_UID,
    "resourceVersion": MASK_VALUE,
    "creationTimestamp": MASK_TIME,
    "deletionTimestamp": MASK_TIME,
    "kubectl.kubernetes.io/last-applied-configuration": MASK_VALUE,
}
# What of a pod the view keeps: what a scheduler, binder or pod grouper writes on it.
POD_PATHS = (
    *("metadata.labels", "metadata.annotations", "metadata.ownerReferences"),
    *("spec.nodeName", "spec.schedulerName", "status.phase", "status.conditions", "status.nominatedNodeName"),
)
KWOK_ANNOTATION = "kwok.x-k8s.io/node"


# --- normalising: pure functions, unit-tested in tests/deploy/test_kai_testbed.py ---


def mask_text(text: str) -> str:
    """A string with every UID in it masked; a whole timestamp becomes ``<time>``."""
    if TIME_RE.match(text):
        return MASK_TIME
    return UID_RE.sub(MASK_UID, text)


def _key(name: str) -> str:
    """A mapping key as a path element: bare when it is a plain word, else quoted in brackets."""
    name = mask_text(name)
    return f".{name}" if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f'["{name}"]'


def _list_key(items: list[Any]) -> str | None:
    """The field that names each item of a list of mappings (``type``, ``name``, ``kind``), if one does."""
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for field in ("type", "name", "kind"):
        values = [i.get(field) for i in items]
        if all(isinstance(v, str) for v in values) and len(set(values)) == len(values):
            return field
    return None


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, masked leaf value) for every leaf; lists of named mappings are keyed by the name,
    so a condition is ``status.conditions[type=Ready].status`` whatever order a writer used."""
    if isinstance(value, dict):
        if not value:
            yield path, {}
        for k in sorted(value):
            v = value[k]
            if k in VOLATILE_KEYS:
                yield path + _key(k), VOLATILE_KEYS[k]
                continue
            if k == "managedFields" and isinstance(v, list):
                yield path + _key(k), writers(v)
                continue
            yield from flatten(v, path + _key(k))
    elif isinstance(value, list):
        if not value:
            yield path, []
        field = _list_key(value)
        for i, item in enumerate(value):
            if field:  # the name is in the path: not repeated as a leaf
                rest = {k: v for k, v in item.items() if k != field}
                yield from flatten(rest, f"{path}[{field}={mask_text(item[field])}]")
            else:
                yield from flatten(item, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, mask_text(value)
    else:
        yield path, value


def writers(managed_fields: list[dict[str, Any]]) -> list[str]:
    """managedFields reduced to who wrote the object and how (``binder Update status``), sorted."""
    out = set()
    for entry in managed_fields:
        parts = [entry.get("manager", "?"), entry.get("operation", "?")]
        if entry.get("subresource"):
            parts.append(entry["subresource"])
        out.add(" ".join(parts))
    return sorted(out)


def normalise_object(obj: dict[str, Any], keep: Iterable[str] | None = None) -> dict[str, Any]:
    """An API object as {field path: masked value}, optionally only under the ``keep`` prefixes."""
    flat = dict(flatten(obj))
    flat.pop(".apiVersion", None), flat.pop(".kind", None)  # the section says what they are
    flat = {path.removeprefix("."): value for path, value in flat.items()}
    if keep is not None:
        prefixes = tuple(keep)
        flat = {p: v for p, v in flat.items() if p.startswith(prefixes)}
    return flat


def normalise_event(event: dict[str, Any]) -> dict[str, str]:
    """One event as what a user reads in ``kubectl get events``; counts and times dropped."""
    involved = event.get("involvedObject") or event.get("regarding") or {}
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component") or ""
    return {
        "object": mask_text(f"{involved.get('kind', '?')}/{involved.get('name', '?')}"),
        "type": event.get("type", ""),
        "reason": event.get("reason", ""),
        "source": source,
        "message": mask_text((event.get("message") or event.get("note") or "").strip()),
    }


def stable_pod_names(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Generated pod names (a Job's ``batch-job-min-member-6h9z7``) -> ``<generateName><i>``, the
    pods of one generateName numbered in the order of their normalised fields, so that runs with
    the same outcome name them alike. Pods named by the user keep their names."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        if prefix := pod["metadata"].get("generateName"):
            groups.setdefault(prefix, []).append(pod)
    out = {}
    for prefix, members in groups.items():
        members.sort(key=lambda p: json.dumps(normalise_object(p, POD_PATHS), sort_keys=True, default=str))
        out.update({p["metadata"]["name"]: f"{prefix}<{i}>" for i, p in enumerate(members)})
    return out


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every generated pod name in its keys and strings replaced (longest first)."""
    if isinstance(value, dict):
        return {_renamed(k, names): _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    if isinstance(value, str):
        for name in sorted(names, key=len, reverse=True):
            value = value.replace(name, names[name])
    return value


def view(pods: list[dict[str, Any]], podgroups: list[dict[str, Any]], queues: list[dict[str, Any]],
         events: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """The normalised view of one run (without its header)."""

    def by_name(objects: list[dict[str, Any]], keep: Iterable[str] | None = None) -> dict[str, Any]:
        return {mask_text(o["metadata"]["name"]): normalise_object(o, keep) for o in objects}

    names = stable_pod_names(pods)
    normalised = _renamed([normalise_event(e) for e in events], names)
    unique = {json.dumps(e, sort_keys=True): e for e in normalised}
    renamed: dict[str, Any] = _renamed(
        {
            "pods": dict(sorted(by_name(pods, POD_PATHS).items())),
            "podgroups": by_name(podgroups),
            "queues": by_name(queues),
            "events": [unique[k] for k in sorted(unique)],
        },
        names,
    )
    return renamed


def diff(a: dict[str, Any], b: dict[str, Any], ignore_reasons: Iterable[str] = ()) -> list[str]:
    """Lines saying where two views differ: objects or paths only one side has, values that differ;
    events with a reason in ``ignore_reasons`` (one that comes and goes between runs) left out."""
    out: list[str] = []
    for section in ("pods", "podgroups", "queues"):
        left, right = a.get(section) or {}, b.get(section) or {}
        for name in sorted(set(left) | set(right)):
            if name not in right:
                out.append(f"{section}/{name}: only in A")
                continue
            if name not in left:
                out.append(f"{section}/{name}: only in B")
                continue
            for path in sorted(set(left[name]) | set(right[name])):
                if path not in right[name]:
                    out.append(f"{section}/{name} {path}: only in A ({left[name][path]!r})")
                elif path not in left[name]:
                    out.append(f"{section}/{name} {path}: only in B ({right[name][path]!r})")
                elif left[name][path] != right[name][path]:
                    out.append(f"{section}/{name} {path}: A {left[name][path]!r} != B {right[name][path]!r}")
    ignored = set(ignore_reasons)
    left_events = {
        json.dumps(e, sort_keys=True) for e in a.get("events") or [] if e.get("reason") not in ignored
    }
    right_events = {
        json.dumps(e, sort_keys=True) for e in b.get("events") or [] if e.get("reason") not in ignored
    }
    out += [f"event only in A: {e}" for e in sorted(left_events - right_events)]
    out += [f"event only in B: {e}" for e in sorted(right_events - left_events)]
    return out


# --- the cluster side ---


class Kubectl:
    """The control plane's kubectl with its admin kubeconfig."""

    def __init__(self) -> None:
        k8s_dir = Path(os.environ.get("K8S_DIR", REPO / "var" / "k8s")).resolve()
        self.kubeconfig = os.environ.get("KUBECONFIG") or str(k8s_dir / "admin.kubeconfig")
        bin_dir = k8s_dir / "bin-dir"
        self.binary = str(Path(bin_dir.read_text().strip()) / "kubectl") if bin_dir.exists() else "kubectl"
        if not Path(self.kubeconfig).exists():
            sys.exit(f"compare: no kubeconfig at {self.kubeconfig}: make k8s-up, or set KUBECONFIG")

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        done = subprocess.run([self.binary, "--kubeconfig", self.kubeconfig, *args], input=stdin,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def items(self, *args: str) -> list[dict[str, Any]]:
        out = self("get", *args, "-o", "json", "--show-managed-fields", check=False)
        if not out.strip():
            return []
        got: dict[str, Any] = json.loads(out)
        items: list[dict[str, Any]] = got.get("items", [got])  # one object named: kubectl prints it bare
        return items


class Scenario:
    """A scenario file: a namespace, KWOK nodes, and manifests applied in order (``kai:`` paths are
    KAI's own files read from its source tree, ``file:`` paths sit beside the scenario)."""

    def __init__(self, path: Path, kai_src: Path | None) -> None:
        spec = yaml.safe_load(path.read_text())
        self.name = spec.get("name", path.stem)
        self.namespace: str = spec["namespace"]
        self.nodes: list[dict[str, Any]] = spec.get("nodes", [])
        self.manifests: list[str] = []
        for entry in spec.get("apply", []):
            if "kai" in entry:
                if kai_src is None:
                    sys.exit(f"compare: {path} applies KAI's {entry['kai']}: give --kai-src (or KAI_SRC)")
                self.manifests.append((kai_src / entry["kai"]).read_text())
            else:
                self.manifests.append((path.parent / entry["file"]).read_text())
        self.settle_seconds: float = spec.get("settle_seconds", 15)

    def documents(self) -> list[dict[str, Any]]:
        return [d for text in self.manifests for d in yaml.safe_load_all(text) if d]

    def queue_names(self) -> list[str]:
        return [d["metadata"]["name"] for d in self.documents() if d.get("kind") == "Queue"]


def node_manifest(node: dict[str, Any]) -> dict[str, Any]:
    resources = {"cpu": str(node.get("cpu", "64")), "memory": str(node.get("memory", "512Gi")), "pods": "110"}
    if node.get("gpus"):
        resources["nvidia.com/gpu"] = str(node["gpus"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node["name"],
            "labels": node.get("labels", {}),
            "annotations": {KWOK_ANNOTATION: "fake"},
        },
        "status": {"allocatable": resources, "capacity": resources},
    }


def wait(what: str, test: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def clean(kubectl: Kubectl, scenario: Scenario) -> None:
    """Remove what the scenario makes: its namespace (pods, PodGroups, events), queues and nodes."""
    kubectl("delete", "namespace", scenario.namespace, "--ignore-not-found", "--wait=true", "--timeout=120s")
    if queues := scenario.queue_names():
        kubectl("delete", "queues.scheduling.run.ai", *queues, "--ignore-not-found", "--wait=true")
    if scenario.nodes:
        kubectl("delete", "node", *(n["name"] for n in scenario.nodes), "--ignore-not-found", "--wait=true")


def setup(kubectl: Kubectl, scenario: Scenario) -> None:
    kubectl("create", "namespace", scenario.namespace)
    account = ("-n", scenario.namespace, "get", "serviceaccount", "default")
    wait("the namespace's default ServiceAccount", lambda: bool(kubectl(*account, check=False)), 60)
    for node in scenario.nodes:
        kubectl("apply", "-f", "-", stdin=json.dumps(node_manifest(node)))

    def nodes_ready() -> bool:
        for node in kubectl.items("nodes", *(n["name"] for n in scenario.nodes)):
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", [])
            )
            if not ready or node["spec"].get("taints"):
                return False
        return True

    wait("the scenario's nodes to be Ready without the not-ready taint", nodes_ready, 90)


def observe(kubectl: Kubectl, scenario: Scenario) -> dict[str, Any]:
    ns = scenario.namespace
    queues = set(scenario.queue_names())
    cluster_events = [e for e in kubectl.items("events", "-n", "default")
                      if (e.get("involvedObject") or {}).get("kind") == "Queue"
                      and e["involvedObject"].get("name") in queues]  # fmt: skip
    return view(
        kubectl.items("pods", "-n", ns),
        kubectl.items("podgroups.scheduling.run.ai", "-n", ns),
        [q for q in kubectl.items("queues.scheduling.run.ai") if q["metadata"]["name"] in queues],
        kubectl.items("events", "-n", ns) + cluster_events,
    )


def settled_pods(current: dict[str, Any]) -> bool:
    """Every pod is bound or has been told why not (PodScheduled set)."""
    return all("spec.nodeName" in p or any(k.startswith("status.conditions[type=PodScheduled]") for k in p)
               for p in current["pods"].values())  # fmt: skip


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (KAI's top-owner-metadata annotation is YAML in a string) as literal blocks."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def dump(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def run(args: argparse.Namespace) -> int:
    kai_src = Path(args.kai_src).resolve() if args.kai_src else None
    scenario = Scenario(Path(args.scenario), kai_src)
    kubectl = Kubectl()
    label = args.label or who_schedules(kubectl)
    crds = ("crd", "queues.scheduling.run.ai", "podgroups.scheduling.run.ai")
    if len(kubectl.items(*crds)) != 2:
        sys.exit("compare: the cluster lacks KAI's Queue and PodGroup CRDs: make kai-up applies them "
                 "(or kubectl apply -f deploy/helm/kai-portal/crds/)")  # fmt: skip
    clean(kubectl, scenario)
    setup(kubectl, scenario)
    for text in scenario.manifests:  # in order, as a user would: queues before the pods naming them
        kubectl("apply", "-n", scenario.namespace, "-f", "-", stdin=text)
    started = time.monotonic()
    last: dict[str, Any] | None = None
    stable_since = started
    settled = False
    while time.monotonic() - started < args.timeout:
        time.sleep(1)
        current = observe(kubectl, scenario)
        if current != last:
            last, stable_since = current, time.monotonic()
        elif (
            current["pods"]
            and settled_pods(current)
            and time.monotonic() - stable_since >= scenario.settle_seconds
        ):
            settled = True
            break
    assert last is not None
    header = {"scenario": scenario.name, "scheduler": label, "settled": settled,
              "settle_seconds": scenario.settle_seconds}  # fmt: skip
    text = dump({**header, **last})
    if args.out:
        Path(args.out).write_text(text)
        state = "settled" if settled else "NOT settled"
        print(f"compare: {scenario.name} under {label}: {state}; wrote {args.out}")
    else:
        sys.stdout.write(text)
    if not args.keep:
        clean(kubectl, scenario)
    return 0 if settled else 1


def who_schedules(kubectl: Kubectl) -> str:
    """``kai <build>`` when the bed's KAI is running, ``portal`` when a portal holds its Lease."""
    kai_dir = Path(os.environ.get("KAI_BED_DIR", REPO / "var" / "kai"))
    running = []
    for pid_file in kai_dir.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), 0)
            running.append(pid_file.stem)
        except (OSError, ValueError):
            continue
    sys.path.insert(0, str(HERE))
    from portal_lease import fresh_portal_leases  # a sibling script, not a package

    portal = fresh_portal_leases(kubectl.items("leases", "-A"), datetime.now(UTC))
    if running and portal:
        sys.exit(
            f"compare: both KAI ({', '.join(sorted(running))}) and the portal ({portal[0]}) run; stop one"
        )
    if running:
        info = kai_dir / "BUILD-INFO"
        build = dict(line.split(" ", 1) for line in info.read_text().splitlines()) if info.exists() else {}
        return f"kai (source commit {build.get('commit', '?')}, build {build.get('key', '?')})"
    if portal:
        return "portal"
    sys.exit("compare: neither KAI (make kai-up) nor a portal loop (a fresh kai-portal Lease) runs; "
             "start one, or name it with --label")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="apply a scenario, wait until settled, dump the normalised view")
    r.add_argument("scenario")
    r.add_argument(
        "--kai-src", default=os.environ.get("KAI_SRC"), help="KAI's source tree (for kai: manifests)"
    )
    r.add_argument("--out", help="write the view here (default stdout)")
    r.add_argument(
        "--label", help="who schedules (default: found from var/kai pid files or the portal's Lease)"
    )
    r.add_argument("--timeout", type=float, default=180, help="seconds to wait for the view to settle")
    r.add_argument("--keep", action="store_true", help="leave the scenario's objects on the cluster")
    d = sub.add_parser("diff", help="compare two views: paths only one has, values that differ")
    d.add_argument("a")
    d.add_argument("b")
    racy = "leave out events with this reason (repeatable), e.g. KAI's racy PodGrouperWarning"
    d.add_argument("--ignore-event-reason", action="append", default=[], metavar="REASON", help=racy)
    args = parser.parse_args(argv)
    if args.command == "run":
        return run(args)
    a, b = (yaml.safe_load(Path(path).read_text()) for path in (args.a, args.b))
    lines = diff(a, b, ignore_reasons=args.ignore_event_reason)
    print("\n".join(lines) if lines else "the two views are identical")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
