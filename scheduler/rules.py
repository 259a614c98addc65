"""Kubernetes placement rules of a job's pods: taints and tolerations, node selectors and node
affinity (required and preferred), pod (anti-)affinity among the job's own pods.

Filters give kube-scheduler's per-node reasons (KAI runs these Kubernetes filters as its
predicates); preferences give a node a score bonus in the tier KAI gives Kubernetes plugin
scores, above every resource-based score (``scores.K8sPlugins``).
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.model import (
    HOSTNAME_LABEL,
    POOL_LABEL,
    Job,
    MatchExpression,
    Node,
    Taint,
    TaskState,
    Toleration,
)
from scheduler.session import Session

NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
# Score tier of Kubernetes plugin preferences, per unit of weight; above the GPU-sharing,
# fits-now, resource-type and binpack parts of a node's score (placement.node_score).
PREFERENCE_TIER = 100_000.0


def untolerated_taint_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def untolerated(node: Node, job: Job, effects: tuple[str, ...]) -> Taint | None:
    """The first taint of ``effects`` on the node that no toleration of the job tolerates."""
    for taint in node.taints:
        if taint.effect in effects and not any(tolerates(t, taint) for t in job.tolerations):
            return taint
    return None


def label(node: Node, key: str) -> str | None:
    value = node.labels.get(key)
    if value is None and key == HOSTNAME_LABEL:
        return node.name
    return value


def matches(node: Node, expr: MatchExpression) -> bool:
    value = label(node, expr.key)
    op = expr.operator
    if op == "In":
        return value is not None and value in expr.values
    if op == "NotIn":
        return value is None or value not in expr.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(expr.values) != 1:
            return False
        try:
            have, bound = int(value), int(expr.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    raise ValueError(f"unknown match operator {op!r}")


def selector_matches(node: Node, selector: Mapping[str, str]) -> bool:
    # The pool key is enforced by sharding already (a session holds one pool's nodes).
    return all(label(node, k) == v for k, v in selector.items() if k != POOL_LABEL)


def static_reason(node: Node, job: Job) -> str | None:
    """Why the job's pods may never go to this node (taints, selector, required node affinity),
    whatever runs there; None when they may."""
    taint = untolerated(node, job, ("NoSchedule", "NoExecute"))
    if taint is not None:
        return untolerated_taint_reason(taint)
    if job.node_selector and not selector_matches(node, job.node_selector):
        return NODE_AFFINITY
    if job.node_affinity and not any(all(matches(node, e) for e in term) for term in job.node_affinity):
        return NODE_AFFINITY
    return None


def job_domains(session: Session, job: Job, key: str) -> set[str]:
    """Values of node label ``key`` of the nodes holding an active pod of the job."""
    out: set[str] = set()
    for t in job.tasks:
        p = session.placements.get(t.key) or session.placements.on_demand(t.key)
        if p is None or p.node is None or p.status in (TaskState.PENDING, TaskState.RELEASING):
            continue
        ns = session.nodes.get(p.node)
        if ns is not None:
            value = label(ns.node, key)
            if value is not None:
                out.add(value)
    return out


def anti_affinity_reason(session: Session, node: Node, job: Job) -> str | None:
    key = job.anti_affinity_key
    if not key:
        return None
    value = label(node, key)
    if value is not None and value in job_domains(session, job, key):
        return ANTI_AFFINITY
    return None


def preference(session: Session, node: Node, job: Job, held: set[str] | None = None) -> float:
    """Score bonus of a node for the job's pods: preferred node affinity weights, preferred
    affinity to the job's own pods, less one weight unit per untolerated PreferNoSchedule taint."""
    score = 0.0
    for term in job.preferred_node_affinity:
        if all(matches(node, e) for e in term.expressions):
            score += term.weight
    if job.affinity_key and job.affinity_weight:
        domains = held if held is not None else job_domains(session, job, job.affinity_key)
        value = label(node, job.affinity_key)
        if value is not None and value in domains:
            score += job.affinity_weight
    score -= sum(
        1
        for taint in node.taints
        if taint.effect == "PreferNoSchedule" and not any(tolerates(t, taint) for t in job.tolerations)
    )
    return score * PREFERENCE_TIER
