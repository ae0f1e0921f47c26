"""A container's environment and command line, built locally the way a kubelet builds them.

Declared env, in order: literal values with $(VAR) expansion against the variables declared
before them; downward-API fields (status.podIP is the pod's loopback address, spec.nodeName
this machine); resource fields from the container's resources (else this machine's size).
Secret and ConfigMap references cannot be read here: `--env NAME=VALUE` supplies them,
optional ones stay unset, any other is an error that names it before anything runs.
The process starts from this machine's environment (standing in for the image's), minus
variables that would steer a launcher behind the job's back (MASTER_ADDR, RANK, PET_*...).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from flatjob.compiler.digits import INT64_MAX
from flatjob.compiler.kube.formats import quantity_value, show

from ..sim.containers import expand
from .errors import LocalError

_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']*)'\]")
# Inherited variables a cluster pod would not have, which torchrun and DDP read as settings.
DROPPED = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
    "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "HOSTNAME",
})
DROPPED_PREFIXES = ("PET_", "TORCHELASTIC_")


@dataclass(frozen=True)
class PodFacts:
    """What the downward API can tell a container about its pod."""

    name: str
    namespace: str
    uid: str
    ip: str
    node: str = "localhost"
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    service_account: str = "default"


def pod_facts(manifest: Mapping[str, Any], uid: str, ip: str, annotations: Mapping[str, str], node: str) -> PodFacts:
    """The facts of one pod incarnation (annotations as set by the runtime at release)."""
    meta = manifest.get("metadata") or {}
    spec = manifest.get("spec") or {}
    return PodFacts(
        name=meta.get("name", ""),
        namespace=meta.get("namespace") or "default",
        uid=uid,
        ip=ip,
        node=node,
        annotations=dict(annotations),
        labels=dict(meta.get("labels") or {}),
        service_account=spec.get("serviceAccountName") or "default",
    )


def field_value(path: str, pod: PodFacts) -> str | None:
    """A downward-API fieldRef, or None when Kubernetes has no such field for env vars."""
    m = _FIELD.fullmatch(path)
    if m:
        return str((pod.annotations if m.group(1) == "annotations" else pod.labels).get(m.group(2), ""))
    return {
        "metadata.name": pod.name,
        "metadata.namespace": pod.namespace,
        "metadata.uid": pod.uid,
        "spec.nodeName": pod.node,
        "spec.serviceAccountName": pod.service_account,
        "status.podIP": pod.ip,
        "status.podIPs": pod.ip,
        "status.hostIP": "127.0.0.1",
        "status.hostIPs": "127.0.0.1",
    }.get(path)


def quantity(value: Any) -> Fraction:
    """A Kubernetes quantity ("500m", "2Gi", "1e3", a JSON number) as the API server decodes it
    (formats.quantity_value), exactly; LocalError beyond an int64, which no kubelet reads."""
    exact = quantity_value(value)
    if exact is None:
        raise LocalError(f"{show(value)} is not a quantity")
    if exact.copy_abs() > INT64_MAX:  # compared, never computed: 1e999999 is a million digits
        raise LocalError(
            f"quantity {show(value)} is more than a kubelet reads (an int64, at most {INT64_MAX}; a cluster's "
            "downward API would give an overflowed number)"
        )
    return Fraction(exact)


def _machine(resource: str) -> Fraction | None:
    if resource == "cpu":
        return Fraction(os.cpu_count() or 1)
    if resource == "memory":
        return Fraction(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return None


# The kubelet computes a resourceFieldRef in int64 (pkg/api/v1/resource/helpers.go,
# convertResourceCPUToString: MilliValue; the others: Value); beyond it the value overflows.
_KUBELET_UNITS = {"cpu": 1000}


def resource_value(ref: Mapping[str, Any], container: Mapping[str, Any]) -> str | None:
    """A resourceFieldRef: the container's limit (else this machine's size), rounded up;
    LocalError for a value a kubelet cannot compute (it would give an overflowed number)."""
    section, _, resource = str(ref.get("resource", "")).partition(".")
    resources = container.get("resources") or {}
    declared = (resources.get(section) or {}).get(resource)
    if declared is None and section == "requests":
        declared = (resources.get("limits") or {}).get(resource)
    value = quantity(declared) if declared is not None else _machine(resource) if section == "limits" else Fraction(0)
    if value is None:
        return None
    divisor = quantity(ref.get("divisor") or "1")
    if value * _KUBELET_UNITS.get(resource, 1) > INT64_MAX or divisor <= 0:
        raise LocalError(
            f"{ref.get('resource')} of {show(declared)} over a divisor of {show(ref.get('divisor') or '1')} is beyond what "
            f"a kubelet computes (an int64 of {'milli' if resource == 'cpu' else ''}units, at most {INT64_MAX})"
        )
    return str(math.ceil(value / divisor))


def _reference(source: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
        if source.get(key) is not None:
            return kind, source[key]
    return None


def _env_from_problems(container: Mapping[str, Any], skip: bool) -> list[str]:
    """envFrom sources that cannot be read here (optional ones may be absent, as in a cluster)."""
    problems = []
    for source in container.get("envFrom") or []:
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = source.get(key)
            if ref is not None and not ref.get("optional") and not skip:
                problems.append(f"envFrom {kind} {ref.get('name')!r} (pass its variables with --env NAME=VALUE and add --skip-env-from)")
    return problems


def _value_from(name: str, source: Mapping[str, Any], pod: PodFacts, container: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(value, problem) of one valueFrom; both None for an optional reference left unset."""
    ref = _reference(source)
    if ref is not None:
        kind, sel = ref
        if sel.get("optional"):
            return None, None
        return None, f"{name} (from {kind} {sel.get('name')!r}, key {sel.get('key')!r}; pass --env {name}=VALUE)"
    value: str | None = None
    if source.get("fieldRef") is not None:
        value = field_value(str(source["fieldRef"].get("fieldPath", "")), pod)
    elif source.get("resourceFieldRef") is not None:
        try:
            value = resource_value(source["resourceFieldRef"], container)
        except LocalError as exc:
            return None, f"{name} ({exc}; pass --env {name}=VALUE)"
    if value is None:
        return None, f"{name} (valueFrom {dict(source)} is not available locally; pass --env {name}=VALUE)"
    return value, None


def declared_env(
    container: Mapping[str, Any], pod: PodFacts, overrides: Mapping[str, str], *, skip_env_from: bool = False
) -> tuple[dict[str, str], list[str]]:
    """(the container's declared env, what cannot be resolved locally), in Kubernetes' order."""
    env: dict[str, str] = {}
    problems = _env_from_problems(container, skip_env_from)
    for e in container.get("env") or []:
        name = e.get("name", "")
        if name in overrides:
            env[name] = overrides[name]
        elif "valueFrom" not in e:
            env[name] = expand(str(e.get("value", "")), env)
        else:
            value, problem = _value_from(name, e["valueFrom"] or {}, pod, container)
            if problem:
                problems.append(problem)
            elif value is not None:
                env[name] = value
    for name, value in overrides.items():
        env.setdefault(name, value)
    return env, problems


def command_line(container: Mapping[str, Any], env: Mapping[str, str], pod: str) -> list[str]:
    """command + args with $(VAR) expanded; a container without a command cannot run here."""
    if not container.get("command"):
        raise LocalError(
            f"container {container.get('name')!r} of pod {pod} sets no command: it would run its image's "
            "entrypoint, which run-local cannot know; set `command` in the job"
        )
    return [expand(str(a), dict(env)) for a in [*container["command"], *(container.get("args") or [])]]


OWN_PREFIX = "FLATJOB_"  # the scripts' paths: run-local's, whatever the pod or the job says


def process_env(base: Mapping[str, str], declared: Mapping[str, str], hostname: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The process environment: this machine's (as the image's), HOSTNAME, run-local's paths,
    then the declared env; run-local's own FLATJOB_* paths last, over the pod's rendered ones
    and anything a job declares (review of round 14: a job's FLATJOB_POD_ENV reached sshd's
    ForceCommand, and told run-local where to write)."""
    env = {k: v for k, v in base.items() if k not in DROPPED and not k.startswith(DROPPED_PREFIXES)}
    env["HOSTNAME"] = hostname
    env.update(extra)
    env.update(declared)
    env.update({k: v for k, v in extra.items() if k.startswith(OWN_PREFIX)})
    return env
