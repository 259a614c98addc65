"""The pod policy: what a job's pod spec may ask for, checked before anything is saved (issue 26).

In kubernetes mode the portal creates a member's pods with its own ServiceAccount, so it must be
at least as strict as the cluster's own admission would be for that member. Three levels, per
team (``Team.pod_security``, set by portal admins only), named after the Kubernetes Pod Security
Standards and checked field for field as the API server's PodSecurity admission checks them at
version ``latest`` (``k8s.io/pod-security-admission`` v0.35, ``policy/check_*.go``):

* ``baseline`` (the default): no host namespaces, privileged containers, host paths or host
  ports, no capabilities beyond the default set, only the safe sysctls, the default /proc mount,
  no AppArmor / seccomp / SELinux overrides, no Windows host process, no probe or lifecycle
  handler aimed at another host.
* ``restricted``: baseline, plus non-root, no privilege escalation, capabilities dropped (ALL;
  only NET_BIND_SERVICE added back), a RuntimeDefault or Localhost seccomp profile, and only the
  volume types a pod may use without node access.
* ``privileged``: no Pod Security check, and the pod may name any ServiceAccount and mount its
  token (a trusted team running cluster software).

At every level, because they bypass the scheduler rather than the node's isolation: no
``nodeName`` (the scheduler places pods), no ``priority`` (it comes from ``priorityClassName``,
as Kubernetes' Priority admission sets it), and no toleration of every taint (``operator: Exists``
without a key), which would let a job onto nodes an admin reserved with a taint.

Pure functions over the pod spec as plain data (the manifest as parsed): the check is the same in
simulated and kubernetes mode, and it never trusts a value's type (``hostNetwork: "yes"`` is not
``false``, so it is refused).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
# Least strict first: the level of a namespace shared by several teams is the least strict of theirs.
STRICTNESS = {PRIVILEGED: 0, BASELINE: 1, RESTRICTED: 2}

# Pod Security Standards, baseline (the API server's lists at version latest).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
PROFILE_TYPES = frozenset({"RuntimeDefault", "Localhost"})  # seccomp and AppArmor alike
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
# Restricted: the only volume sources a pod may name.
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
        "image",
    }
)
RESTRICTED_ADD = frozenset({"NET_BIND_SERVICE"})
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe", "lifecycle.postStart", "lifecycle.preStop")

_RAISE = "a portal admin can change the team's pod security level"


@dataclass(frozen=True)
class Violation:
    """One field the policy refuses: where it is (a manifest path) and the rule it breaks."""

    path: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}"


def check(
    spec: dict[str, Any], annotations: dict[str, Any] | None = None, level: str = BASELINE, prefix: str = ""
) -> list[Violation]:
    """Every violation of ``level`` in a pod ``spec`` (and its metadata ``annotations``), in the
    order of the manifest. ``prefix`` is where the pod sits in the manifest: ``""`` for a Pod,
    ``"spec.template."`` for a batch Job, so paths read ``spec.template.spec.hostNetwork``."""
    if level not in LEVELS:
        raise ValueError(f"unknown pod security level {level!r}")
    spec = _map(spec)
    found = list(_scheduling(spec, prefix))
    if level != PRIVILEGED:
        found += _service_account(spec, prefix)
        found += _baseline(spec, _map(annotations), prefix)
    if level == RESTRICTED:
        found += _restricted(spec, prefix)
    return found


# ----- every level ----------------------------------------------------------------------------


def _scheduling(spec: dict[str, Any], prefix: str) -> Iterator[Violation]:
    here = f"{prefix}spec"
    if spec.get("nodeName"):
        yield Violation(
            f"{here}.nodeName",
            "every level: the scheduler places pods; a pod with nodeName "
            "would bypass queues and quotas. Remove it.",
        )
    if spec.get("priority") is not None:
        yield Violation(
            f"{here}.priority",
            "every level: a pod's priority comes from its priorityClassName "
            "(as Kubernetes sets it); remove priority and name a class.",
        )
    for i, toleration in _items(spec.get("tolerations")):
        if toleration.get("operator") == "Exists" and not toleration.get("key"):
            yield Violation(
                f"{here}.tolerations[{i}]",
                "every level: a toleration without a key "
                "tolerates every taint, including those reserving nodes; name the taint's key.",
            )


# ----- baseline and restricted: portal rules ---------------------------------------------------


def _service_account(spec: dict[str, Any], prefix: str) -> Iterator[Violation]:
    here = f"{prefix}spec"
    for field in ("serviceAccountName", "serviceAccount"):
        if spec.get(field) not in (None, "", "default"):
            yield Violation(
                f"{here}.{field}",
                "baseline: pods run as the namespace's default "
                f"ServiceAccount; remove {field} ({_RAISE} to privileged).",
            )
    if spec.get("automountServiceAccountToken") not in (None, False):
        yield Violation(
            f"{here}.automountServiceAccountToken",
            "baseline: mounting the ServiceAccount "
            f"token cannot be asked for; remove it or set it to false ({_RAISE} to privileged).",
        )


# ----- Pod Security Standard: baseline ---------------------------------------------------------


def _baseline(spec: dict[str, Any], annotations: dict[str, Any], prefix: str) -> Iterator[Violation]:
    here = f"{prefix}spec"
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if not _false(spec.get(field)):
            yield _base(f"{here}.{field}", "host namespaces are not allowed; remove it or set it to false")
    context = _map(spec.get("securityContext"))
    yield from _contexts(context, f"{here}.securityContext")
    for i, sysctl in _items(context.get("sysctls")):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield _base(
                f"{here}.securityContext.sysctls[{i}].name",
                f"only the safe sysctls are allowed ({', '.join(sorted(SAFE_SYSCTLS))})",
            )
    for i, volume in _items(spec.get("volumes")):
        if "hostPath" in volume:
            yield _base(
                f"{here}.volumes[{i}].hostPath",
                "hostPath volumes are not allowed; use a "
                "persistentVolumeClaim, emptyDir, configMap or secret",
            )
    for key, value in annotations.items():
        if str(key).startswith(APPARMOR_ANNOTATION) and not _apparmor_annotation_ok(value):
            yield _base(
                f'{prefix}metadata.annotations["{key}"]',
                "AppArmor may only be runtime/default or localhost/<profile>",
            )
    user_namespace = spec.get("hostUsers") is False
    for where, container in _containers(spec, here):
        sc = _map(container.get("securityContext"))
        sc_path = f"{where}.securityContext"
        if not _false(sc.get("privileged")):
            yield _base(f"{sc_path}.privileged", "privileged containers are not allowed")
        added = _list(_map(sc.get("capabilities")).get("add"))
        for j, capability in enumerate(added):
            if capability not in BASELINE_CAPABILITIES:
                yield _base(
                    f"{sc_path}.capabilities.add[{j}]",
                    f"capability {_shown(capability)} "
                    f"is beyond the default set ({', '.join(sorted(BASELINE_CAPABILITIES))})",
                )
        if sc.get("procMount") not in (None, "Default") and not user_namespace:
            yield _base(f"{sc_path}.procMount", "only the Default /proc mount is allowed")
        yield from _contexts(sc, sc_path)
        for j, port in _items(container.get("ports")):
            if port.get("hostPort") not in (None, 0):
                yield _base(f"{where}.ports[{j}].hostPort", "host ports are not allowed; remove hostPort")
        for handler in HANDLERS:
            found: Any = container
            for step in handler.split("."):
                found = _map(found.get(step))
            for kind in ("httpGet", "tcpSocket"):
                if _map(found.get(kind)).get("host") not in (None, ""):
                    yield _base(
                        f"{where}.{handler}.{kind}.host",
                        "probes and lifecycle handlers may only reach the pod itself; remove host",
                    )


def _contexts(sc: dict[str, Any], path: str) -> Iterator[Violation]:
    """The checks a pod's and a container's securityContext share."""
    if not _false(_map(sc.get("windowsOptions")).get("hostProcess")):
        yield _base(f"{path}.windowsOptions.hostProcess", "Windows host processes are not allowed")
    seccomp = _map(sc.get("seccompProfile")).get("type")
    if seccomp is not None and seccomp not in PROFILE_TYPES:
        yield _base(f"{path}.seccompProfile.type", "seccomp may only be RuntimeDefault or Localhost")
    apparmor = _map(sc.get("appArmorProfile")).get("type")
    if apparmor is not None and apparmor not in PROFILE_TYPES:
        yield _base(f"{path}.appArmorProfile.type", "AppArmor may only be RuntimeDefault or Localhost")
    selinux = _map(sc.get("seLinuxOptions"))
    if selinux.get("type") not in (None, *SELINUX_TYPES):
        yield _base(
            f"{path}.seLinuxOptions.type",
            f"the SELinux type may only be {', '.join(sorted(t for t in SELINUX_TYPES if t))}",
        )
    for field in ("user", "role"):
        if selinux.get(field) not in (None, ""):
            yield _base(f"{path}.seLinuxOptions.{field}", f"a custom SELinux {field} is not allowed")


# ----- Pod Security Standard: restricted --------------------------------------------------------


def _restricted(spec: dict[str, Any], prefix: str) -> Iterator[Violation]:
    here = f"{prefix}spec"
    for i, volume in _items(spec.get("volumes")):
        for source in sorted(set(volume) - {"name", "hostPath"}):  # hostPath: refused by baseline
            if source not in RESTRICTED_VOLUMES:
                yield _strict(
                    f"{here}.volumes[{i}].{source}",
                    f"volume type is not allowed; use one of {', '.join(sorted(RESTRICTED_VOLUMES))}",
                )
    context = _map(spec.get("securityContext"))
    windows = _map(spec.get("os")).get("name") == "windows"
    user_namespace = spec.get("hostUsers") is False
    pod_non_root = context.get("runAsNonRoot") is True
    pod_seccomp = _map(context.get("seccompProfile")).get("type")
    if not user_namespace:
        if context.get("runAsNonRoot") not in (None, True):
            yield _strict(
                f"{here}.securityContext.runAsNonRoot", "containers must run as non-root; set it true"
            )
        if context.get("runAsUser") == 0:
            yield _strict(f"{here}.securityContext.runAsUser", "containers must not run as user 0")
    for where, container in _containers(spec, here):
        sc = _map(container.get("securityContext"))
        sc_path = f"{where}.securityContext"
        if not user_namespace:
            non_root = sc.get("runAsNonRoot")
            if non_root not in (None, True) or (non_root is None and not pod_non_root):
                yield _strict(
                    f"{sc_path}.runAsNonRoot",
                    "containers must run as non-root; set runAsNonRoot "
                    "to true here or in spec.securityContext",
                )
            if sc.get("runAsUser") == 0:
                yield _strict(f"{sc_path}.runAsUser", "containers must not run as user 0")
        if windows:  # the API server exempts Windows pods from the Linux-only checks below
            continue
        if sc.get("allowPrivilegeEscalation") is not False:
            yield _strict(f"{sc_path}.allowPrivilegeEscalation", "must be set to false")
        seccomp = _map(sc.get("seccompProfile")).get("type")
        if seccomp is None and pod_seccomp not in PROFILE_TYPES:
            yield _strict(
                f"{sc_path}.seccompProfile.type",
                "a seccomp profile is required: set type "
                "RuntimeDefault (or Localhost) here or in spec.securityContext",
            )
        capabilities = _map(sc.get("capabilities"))
        if "ALL" not in _list(capabilities.get("drop")):
            yield _strict(f"{sc_path}.capabilities.drop", 'must include "ALL"')
        for j, capability in enumerate(_list(capabilities.get("add"))):
            if capability not in RESTRICTED_ADD and capability in BASELINE_CAPABILITIES:
                yield _strict(f"{sc_path}.capabilities.add[{j}]", "only NET_BIND_SERVICE may be added")


# ----- plumbing --------------------------------------------------------------------------------


def _base(path: str, rule: str) -> Violation:
    return Violation(path, f"baseline: {rule} ({_RAISE}).")


def _strict(path: str, rule: str) -> Violation:
    return Violation(path, f"restricted: {rule} ({_RAISE}).")


def _containers(spec: dict[str, Any], here: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in CONTAINER_LISTS:
        for i, container in _items(spec.get(kind)):
            yield f"{here}.{kind}[{i}]", container


def _false(value: Any) -> bool:
    """Allowed values of a boolean the standard restricts: undefined or false (nothing truthy,
    and no string: ``"false"`` would be refused by the API server anyway)."""
    return value is None or value is False


def _apparmor_annotation_ok(value: Any) -> bool:
    return value in ("", "runtime/default") or (isinstance(value, str) and value.startswith("localhost/"))


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _items(value: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    for i, item in enumerate(_list(value)):
        if isinstance(item, dict):
            yield i, item


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}…"
