"""The job's runtime: ServiceAccount, least-privilege Role and RoleBinding, and a Deployment.

The Role names every verb the runtime uses and nothing more; where Kubernetes allows it,
access is narrowed to the job's own objects by resourceNames.  Creating pods and Secrets
cannot be narrowed by name (the API has no name at create-authorization time).
"""

from __future__ import annotations

from typing import Any

import orjson

from .. import keys
from ..plan import JobPlan
from .meta import common_labels, metadata
from .record import PLURALS
from .tensorboard import render_tensorboard, tensorboard_name

HTTP_PORT = 8080
SSH_KINDS = ("DeepSpeedJob", "ColossalAIJob")


def runtime_name(job: str) -> str:
    """Name of the runtime's Deployment, ServiceAccount, Role, RoleBinding and Lease."""
    return f"{job}-runtime"


def _rule(groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": groups, "resources": resources}
    if names:
        rule["resourceNames"] = names
    rule["verbs"] = verbs
    return rule


def rbac_rules(plan: JobPlan) -> list[dict[str, Any]]:
    """Exactly what the runtime calls, narrowed by name wherever Kubernetes can (pinned by
    tests/runtime/test_rbac.py against every request the runtime makes in its scenarios).

    Creating cannot be narrowed by name (the API has no name at create-authorization time);
    list and watch can, when the request selects metadata.name, as the runtime's do for its
    record, Secret and PodGroup, but not with a label selector (its PodTemplates and pods).
    """
    job, plural = plan.name, PLURALS[plan.kind]
    rules = [
        # Read the job's PodTemplates (git holds them); the runtime never changes them.
        _rule([""], ["podtemplates"], ["list", "watch"]),
        # Create the job's pods from them, release (patch the gate) and delete them. Not by
        # name: this Role is rendered from the new templates, and a commit with fewer replicas
        # must still let the runtime delete the pods whose templates went. The runtime deletes
        # and patches only pods its record owns, with a uid precondition (docs/runtime.md, Trust).
        _rule([""], ["pods"], ["create", "delete", "list", "patch", "watch"]),
        # Watch its own record (a metadata.name field selector) and write its status.
        _rule([keys.RECORD_GROUP], [plural], ["list", "watch"], [job]),
        _rule([keys.RECORD_GROUP], [f"{plural}/status"], ["update"], [job]),
        # Events on every transition.
        _rule([""], ["events"], ["create"]),
        # Leader election: one runtime acts at a time during a rollout.
        _rule(["coordination.k8s.io"], ["leases"], ["create"]),
        _rule(["coordination.k8s.io"], ["leases"], ["get", "update"], [runtime_name(job)]),
    ]
    if plan.kind in SSH_KINDS and plan.ssh_secret:
        # Watched by name, so a deleted Secret is noticed and (when it is the job's own) made again.
        rules += [_rule([""], ["secrets"], ["create"]), _rule([""], ["secrets"], ["list", "watch"], [plan.ssh_secret])]
    if render_tensorboard(plan):
        # Watched by name for status.tensorboard (is the TensorBoard ready?); never changed.
        rules.append(_rule(["apps"], ["deployments"], ["list", "watch"], [tensorboard_name(job)]))
    if plan.min_member and _uses_podgroup(plan):
        rules.append(_rule(["scheduler.tensorstack.dev"], ["podgroups"], ["list", "watch"], [job]))
    return rules


def _uses_podgroup(plan: JobPlan) -> bool:
    from .podgroup import render_podgroup

    return bool(render_podgroup(plan))


def render_runtime(plan: JobPlan) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding and Deployment of the job's runtime."""
    name = runtime_name(plan.name)
    labels = {**common_labels(plan, "runtime"), keys.RUNTIME_FOR: plan.name, keys.ROLE: "runtime"}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(plan, name, labels)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata(plan, name, labels), "rules": rbac_rules(plan)}
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": name}
    if plan.namespace:
        subject["namespace"] = plan.namespace
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(plan, name, labels),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [subject],
    }
    return [sa, role, binding, _deployment(plan, name, labels)]


# The runtime's memory, from `python bench/runtime.py --pods N` (its own process over HTTP,
# pods shaped like an API server's): ~48 MiB of interpreter, client and loop, plus ~20 KiB per
# pod of trimmed informer objects and ledger.  The request is that estimate, the limit twice it
# (never under 128 MiB): a relist holds the old and the new list at once.
# The runtime also keeps each PodTemplate's pod spec (compact JSON) until it creates the pod:
# what a pod's spec holds beyond TEMPLATE_ALLOWANCE (the per-pod figure covers ~8 KiB; compile
# accepts pods of up to 1 MiB, FJ324) is added to the request, so big templates fit too.
MEMORY_BASE_MIB = 48
PODS_PER_MIB = 50
MEMORY_LIMIT_MIN_MIB = 128
TEMPLATE_ALLOWANCE = 8 * 1024
MIB = 1024 * 1024


def _beyond_allowance(plan: JobPlan) -> int:
    """Bytes of the pods' specs beyond TEMPLATE_ALLOWANCE each (a template shared by pods is measured once)."""
    sizes: dict[int, int] = {}
    total = 0
    for pod in plan.pods:
        key = id(pod.template)
        if key not in sizes:
            sizes[key] = max(0, len(orjson.dumps(pod.template.get("spec"))) - TEMPLATE_ALLOWANCE)
        total += sizes[key]
    return total


def runtime_resources(pods: int, template_bytes: int = 0) -> dict[str, Any]:
    """The runtime container's requests and limits for a job of `pods` pods (its elastic
    maximum) whose pod specs hold `template_bytes` beyond TEMPLATE_ALLOWANCE each, in all."""
    request = MEMORY_BASE_MIB + pods // PODS_PER_MIB + -(-template_bytes // MIB)
    limit = max(MEMORY_LIMIT_MIN_MIB, 2 * request)
    return {"requests": {"cpu": "10m", "memory": f"{request}Mi"}, "limits": {"memory": f"{limit}Mi"}}


def _deployment(plan: JobPlan, name: str, labels: dict[str, str]) -> dict[str, Any]:
    # The role keeps this selector off the TensorBoard pods, which are also runtime-for the job.
    match = {keys.RUNTIME_FOR: plan.name, keys.ROLE: "runtime"}
    probe = lambda path: {"httpGet": {"path": path, "port": "http"}, "periodSeconds": 10}  # noqa: E731
    container = {
        "name": "runtime",
        "image": plan.options.runtime_image,
        "args": ["runtime", "--kind", plan.kind, "--name", plan.name],
        "env": [
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz"),
        "resources": runtime_resources(len(plan.pods), _beyond_allowance(plan)),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(plan, name, labels, {keys.VERSION: plan_version()}),
        "spec": {
            "replicas": 1,
            # Recreate: the old runtime stops before the new one starts (a Lease guards the rest).
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": match},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                },
            },
        },
    }


def plan_version() -> str:
    """The flatjob version that rendered the runtime (equals its image tag by default)."""
    from ..version import __version__

    return __version__
