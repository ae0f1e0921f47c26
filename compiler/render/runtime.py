"""The runtime: ServiceAccount, least-privilege Role and RoleBinding, and a Deployment.

Per-job mode (`--runtime job`): one runtime per job, in the job's folder, acting on that job
alone.  Namespace mode (the default): one runtime for every flatjob job of a namespace,
rendered once in the namespace's folder from what its jobs need (`RuntimeNeeds`), whatever
the number of job files.  The Role names every verb the runtime uses and nothing more; where
Kubernetes allows it, access is narrowed by resourceNames.  Creating pods and Secrets cannot
be narrowed by name (the API has no name at create-authorization time), nor can a watch by
label (the namespace runtime's one watch on all its jobs' pods).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
        # Events on every transition; a repeat patches the Event's count, as client-go's recorder does.
        _rule([""], ["events"], ["create", "patch"]),
        # Leader election: one runtime acts at a time during a rollout.
        _rule(["coordination.k8s.io"], ["leases"], ["create"]),
        _rule(["coordination.k8s.io"], ["leases"], ["get", "update"], [runtime_name(job)]),
    ]
    if plan.kind in SSH_KINDS and plan.ssh_secret_named and plan.ssh_secret:
        # The author's own Secret (flatjob.dev/ssh-secret): watched by name, never made or deleted.
        rules.append(_rule([""], ["secrets"], ["list", "watch"], [plan.ssh_secret]))
    elif plan.kind in SSH_KINDS and plan.ssh_secret:
        # Watched by name, so a deleted Secret is noticed and made again. Deleted by name (a uid
        # precondition) only to replace one with the record's ownerReference that no released pod
        # of the job vouches for (runtime/sshkeys.py).
        rules += [_rule([""], ["secrets"], ["create"]), _rule([""], ["secrets"], ["delete", "list", "watch"], [plan.ssh_secret])]
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
    """ServiceAccount, Role, RoleBinding and Deployment of the job's own runtime (per-job mode;
    in namespace mode the job's folder holds none: see render_namespace_runtime)."""
    if plan.options.runtime != keys.RUNTIME_MODE_JOB:
        return []
    name = runtime_name(plan.name)
    labels = {**common_labels(plan, "runtime"), keys.RUNTIME_FOR: plan.name, keys.ROLE: "runtime"}
    meta = lambda: metadata(plan, name, labels)  # noqa: E731
    args = ["runtime", "--kind", plan.kind, "--name", plan.name]
    deployment = _deployment(meta(), name, labels, {keys.RUNTIME_FOR: plan.name, keys.ROLE: "runtime"}, args, plan.options.runtime_image, runtime_resources(len(plan.pods), template_bytes=beyond_allowance(plan)))
    return [*_access(meta, name, plan.namespace, rbac_rules(plan)), deployment]


def _access(meta: Any, name: str, namespace: str | None, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ServiceAccount, its Role and the RoleBinding between them."""
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(), "rules": rules}
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": name}
    if namespace:
        subject["namespace"] = namespace
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [subject],
    }
    return [sa, role, binding]


# --- namespace mode -----------------------------------------------------------------------------

@dataclass(frozen=True)
class RuntimeNeeds:
    """What a namespace runtime needs to know of one job it serves (kept from its plan)."""

    name: str
    kind: str
    namespace: str | None
    pods: int  # its pods (the elastic maximum)
    ssh_secret: str | None  # the Secret it reads (SSH kinds)
    ssh_secret_named: bool  # the author's own (flatjob.dev/ssh-secret): read, never made or deleted
    tensorboard: bool
    podgroup: bool
    image: str
    template_bytes: int  # what its pod specs hold beyond TEMPLATE_ALLOWANCE each (memory)

    @classmethod
    def of(cls, plan: JobPlan) -> RuntimeNeeds:
        secret = plan.ssh_secret if plan.kind in SSH_KINDS else None
        return cls(plan.name, plan.kind, plan.namespace, len(plan.pods), secret, secret is not None and plan.ssh_secret_named, bool(render_tensorboard(plan)),
                   bool(plan.min_member and _uses_podgroup(plan)), plan.options.runtime_image, beyond_allowance(plan))


def _names_by_kind(jobs: list[RuntimeNeeds]) -> list[tuple[str, list[str]]]:
    """The jobs' names per record kind, both sorted (the Role is the same whatever the file order)."""
    kinds: dict[str, set[str]] = {}
    for j in jobs:
        kinds.setdefault(j.kind, set()).add(j.name)
    return [(kind, sorted(names)) for kind, names in sorted(kinds.items())]


def namespace_rules(jobs: Iterable[RuntimeNeeds]) -> list[dict[str, Any]]:
    """What a namespace runtime calls: every job record kind (one process serves them all),
    the pods of all jobs, and by name only the Secrets its jobs name and its own Lease."""
    jobs = list(jobs)
    plurals = [PLURALS[k] for k in sorted(PLURALS)]
    rules = [
        _rule([""], ["podtemplates"], ["list", "watch"]),
        # As the per-job Role: the runtime deletes and patches only pods a record it serves owns.
        _rule([""], ["pods"], ["create", "delete", "list", "patch", "watch"]),
        # Every record kind, watched once for the namespace (a list cannot be narrowed by name);
        # the status written only of the records it is rendered from, by name.
        _rule([keys.RECORD_GROUP], plurals, ["list", "watch"]),
        *(_rule([keys.RECORD_GROUP], [f"{PLURALS[kind]}/status"], ["update"], names) for kind, names in _names_by_kind(jobs)),
        _rule([""], ["events"], ["create", "patch"]),
        _rule(["coordination.k8s.io"], ["leases"], ["create"]),
        _rule(["coordination.k8s.io"], ["leases"], ["get", "update"], [keys.NAMESPACE_RUNTIME]),
        # Its own Deployment, read once to own the Lease: the Lease goes when the Deployment does.
        _rule(["apps"], ["deployments"], ["get"], [keys.NAMESPACE_RUNTIME]),
    ]
    read = sorted({j.ssh_secret for j in jobs if j.ssh_secret})
    own = sorted({j.ssh_secret for j in jobs if j.ssh_secret and not j.ssh_secret_named})
    # Read by name when a job needs its Secret (never a list or watch of every Secret); the
    # runtime's own made, and deleted by name (a uid precondition) to replace one no released pod
    # vouches for; the ones a job names itself only read.
    if own:
        rules.append(_rule([""], ["secrets"], ["create"]))
    rules += [_rule([""], ["secrets"], verbs, names) for verbs, names in ((["delete", "get"], own), (["get"], [n for n in read if n not in own])) if names]
    if any(j.tensorboard for j in jobs):
        rules.append(_rule(["apps"], ["deployments"], ["list", "watch"]))
    if any(j.podgroup for j in jobs):
        rules.append(_rule(["scheduler.tensorstack.dev"], ["podgroups"], ["list", "watch"]))
    return rules


# A namespace runtime keeps per job a worker, its record and its Events besides its pods:
# measured with `python bench/runtime.py --jobs N --pods-per-job M` (docs/architecture.md §5).
JOBS_PER_MIB = 10


def render_namespace_runtime(namespace: str | None, jobs: Iterable[RuntimeNeeds]) -> list[dict[str, Any]]:
    """The one runtime of a namespace: ServiceAccount, Role, RoleBinding and Deployment, all
    named `flatjob` (no job's own object can be: theirs are `<job>-runtime`, `<job>-...`)."""
    jobs = sorted(jobs, key=lambda j: (j.kind, j.name))
    name = keys.NAMESPACE_RUNTIME
    labels = {"app.kubernetes.io/name": "flatjob", "app.kubernetes.io/component": "runtime", "app.kubernetes.io/managed-by": "flatjob",
              keys.RUNTIME_FOR: name, keys.ROLE: "runtime"}

    def meta() -> dict[str, Any]:
        out: dict[str, Any] = {"name": name}
        if namespace:
            out["namespace"] = namespace
        out["labels"] = dict(labels)
        return out

    image = min((j.image for j in jobs), default=f"ghcr.io/flatjob/flatjob:{plan_version()}")
    pods = sum(j.pods for j in jobs)
    resources = runtime_resources(pods, jobs=len(jobs), template_bytes=sum(j.template_bytes for j in jobs))
    deployment = _deployment(meta(), name, labels, {keys.RUNTIME_FOR: name, keys.ROLE: "runtime"}, ["runtime"], image, resources)
    return [*_access(meta, name, namespace, namespace_rules(jobs)), deployment]


# The runtime's memory, from `python bench/runtime.py --pods N` (its own process over HTTP,
# pods shaped like an API server's): ~48 MiB of interpreter, client and loop, plus ~20 KiB per
# pod of trimmed informer objects and ledger.  The request is that estimate, the limit twice it
# (never under 128 MiB): a relist holds the old and the new list at once.
# The runtime also keeps each PodTemplate's pod spec (compact JSON) until it creates the pod:
# what a pod's spec holds beyond TEMPLATE_ALLOWANCE (the per-pod figure covers ~8 KiB; compile
# accepts pods of up to 1 MiB, FJ324) is added to the request, so big templates fit too: three
# times per pod, as it holds each PodTemplate's parsed (~2.4x its JSON), and four times per
# replica type, as it holds the record, which repeats each type's template (~3.7x; tracemalloc
# of trim.template and trim.record for an 850 KB pod spec, review 24 round 3: 20 such jobs
# needed 150 MiB of the 138 MiB limit when the bytes were counted once).
MEMORY_BASE_MIB = 48
# The request is rounded up to this step: it is in the runtime's pod template, and a change
# there restarts the runtime (Recreate) of every job of the namespace; a commit adding one job
# changed it about every 10 jobs, now about every 160 jobs or 800 pods.
MEMORY_STEP_MIB = 16
PER_POD_COPIES, PER_TYPE_COPIES = 3, 4
PODS_PER_MIB = 50
MEMORY_LIMIT_MIN_MIB = 128
TEMPLATE_ALLOWANCE = 8 * 1024
MIB = 1024 * 1024


def beyond_allowance(plan: JobPlan) -> int:
    """Bytes the runtime holds for the pods' specs beyond TEMPLATE_ALLOWANCE each: every pod's
    PodTemplate and the record's copy of each type's template (a shared template measured once)."""
    sizes: dict[int, int] = {}
    total = 0
    for pod in plan.pods:
        key = id(pod.template)
        if key not in sizes:
            sizes[key] = max(0, len(orjson.dumps(pod.template.get("spec"))) - TEMPLATE_ALLOWANCE)
        total += sizes[key]
    return total * PER_POD_COPIES + sum(sizes.values()) * PER_TYPE_COPIES


def runtime_resources(pods: int, jobs: int = 1, template_bytes: int = 0) -> dict[str, Any]:
    """The runtime container's requests and limits for `pods` pods (the elastic maxima) of
    `jobs` jobs whose pod specs hold `template_bytes` beyond TEMPLATE_ALLOWANCE each, in all."""
    need = MEMORY_BASE_MIB + pods // PODS_PER_MIB + (jobs - 1) // JOBS_PER_MIB + -(-template_bytes // MIB)
    request = -(-need // MEMORY_STEP_MIB) * MEMORY_STEP_MIB
    limit = max(MEMORY_LIMIT_MIN_MIB, 2 * request)
    return {"requests": {"cpu": "10m", "memory": f"{request}Mi"}, "limits": {"memory": f"{limit}Mi"}}


def _deployment(meta: dict[str, Any], name: str, labels: dict[str, str], match: dict[str, str], args: list[str], image: str, resources: dict[str, Any]) -> dict[str, Any]:
    """The runtime's Deployment (`match`: its selector; the role keeps it off the TensorBoard
    pods, which are also runtime-for the job)."""
    probe = lambda path: {"httpGet": {"path": path, "port": "http"}, "periodSeconds": 10}  # noqa: E731
    container = {
        "name": "runtime",
        "image": image,
        "args": args,
        "env": [
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
        "readinessProbe": probe("/readyz"),
        "livenessProbe": probe("/healthz"),
        "resources": resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**meta, "annotations": {keys.VERSION: plan_version()}},
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
