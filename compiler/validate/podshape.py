"""How a pod template's parts fit together, as only the API server checks it.

The OpenAPI schema types each field alone; pkg/apis/core/validation (ValidatePodTemplateSpec)
also refuses shapes the schema cannot say, so they passed lint and failed the sync or the
runtime's pod create (review 21, round 4):
- one-of groups: a volume has at most one source (validateVolumeSource; none is an emptyDir,
  SetDefaults_Volume), a probe or lifecycle
  hook exactly one handler (validateHandler), an env var a value or a valueFrom with exactly
  one reference (validateEnvVarValueFrom), an envFrom item exactly one of configMapRef and
  secretRef (ValidateEnvFrom);
- references: a volumeMount or volumeDevice names a volume of the pod (validateVolumeMounts);
- combinations: no readiness, liveness or startup probe on an init container (a sidecar, one
  with restartPolicy Always, may have them), no ephemeral containers in a template,
  privileged with allowPrivilegeEscalation false, a Localhost seccomp profile without its
  path, shareProcessNamespace with hostPID, hostNetwork with a hostPort other than its
  containerPort, a toleration `Exists` with a value, dnsPolicy None without dnsConfig;
- label selectors of pod (anti-)affinity and topology spread: keys and values as labels'.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import Diagnostic
from ..kube.formats import show
from ..loader import Document, PathT
from . import names
from .podparts import spec_parts
from .podspec import CONTAINERS, VALUE, _walk, label_map, names_of, template_specs

# The volume sources of core/v1 VolumeSource (validateVolumeSource counts them).
VOLUME_SOURCES = frozenset({
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi", "glusterfs",
    "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap",
    "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos", "csi",
    "ephemeral", "image",
})
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
HOOK_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
ENV_REFS = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
ENV_FROM_REFS = ("configMapRef", "secretRef")  # ValidateEnvFrom: exactly one
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _exactly_one(doc: Document, given: dict[str, Any], choices: Any, what: str, at: PathT, needed: bool = True) -> Iterator[Diagnostic]:
    found = [k for k in given if k in choices and given[k] is not None]  # a null is absent, as Go's JSON decoding leaves a nil pointer
    if not found and needed:
        yield doc.diagnostic(VALUE, f"{what} must have one of: {', '.join(sorted(choices)) if len(choices) < 8 else 'a volume source (emptyDir, configMap, secret, persistentVolumeClaim, ...)'}", at, key=True)
    elif len(found) > 1:
        yield doc.diagnostic(VALUE, f"{what} may have only one of {', '.join(found)}", (*at, found[1]), key=True)


def _volumes(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for i, v in enumerate(_list(spec.get("volumes"))):
        if isinstance(v, dict):
            # none is an emptyDir (SetDefaults_Volume), two are refused
            yield from _exactly_one(doc, v, VOLUME_SOURCES, f"volume {show(v.get('name'))}", (*base, "volumes", i), needed=False)
        claim = _dict(_dict(v).get("persistentVolumeClaim"))
        if "claimName" in claim and claim["claimName"] == "":
            yield doc.diagnostic(VALUE, "persistentVolumeClaim.claimName must not be empty", (*base, "volumes", i, "persistentVolumeClaim", "claimName"))
    named = names_of(_list(spec.get("volumes")))
    for path, c in _walk(spec, (CONTAINERS, "*"), base):
        for field in ("volumeMounts", "volumeDevices"):
            for j, m in enumerate(_list(_dict(c).get(field))):
                name = _dict(m).get("name")
                if isinstance(name, str) and name not in named:
                    yield doc.diagnostic(VALUE, f"{field} name {show(name)} is no volume of this pod", (*path, field, j, "name"),
                                         hint=f"volumes: {', '.join(sorted(named)) or 'none'}")


def _handlers(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for path, c in _walk(spec, (CONTAINERS, "*"), base):
        c = _dict(c)
        for probe in PROBES:
            if isinstance(c.get(probe), dict):
                yield from _exactly_one(doc, c[probe], PROBE_HANDLERS, probe, (*path, probe))
        for hook, handler in _dict(c.get("lifecycle")).items():
            if hook in ("postStart", "preStop") and isinstance(handler, dict):
                yield from _exactly_one(doc, handler, HOOK_HANDLERS, f"lifecycle.{hook}", (*path, "lifecycle", hook))
        for j, e in enumerate(_list(c.get("env"))):
            e = _dict(e)
            where = (*path, "env", j)
            if e.get("value") not in (None, "") and "valueFrom" in e:
                yield doc.diagnostic(VALUE, f"env {show(e.get('name'))} has both value and valueFrom", (*where, "valueFrom"), key=True)
            elif isinstance(e.get("valueFrom"), dict):
                yield from _exactly_one(doc, e["valueFrom"], ENV_REFS, f"env {show(e.get('name'))} valueFrom", (*where, "valueFrom"))
        for j, e in enumerate(_list(c.get("envFrom"))):
            if isinstance(e, dict):
                yield from _exactly_one(doc, e, ENV_FROM_REFS, "an envFrom item", (*path, "envFrom", j))


def _combinations(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    if _list(spec.get("ephemeralContainers")):
        yield doc.diagnostic(VALUE, "ephemeralContainers are not allowed in a pod template", (*base, "ephemeralContainers"), key=True)
    if spec.get("shareProcessNamespace") is True and spec.get("hostPID") is True:
        yield doc.diagnostic(VALUE, "shareProcessNamespace and hostPID cannot both be true", (*base, "shareProcessNamespace"))
    if spec.get("dnsPolicy") == "None" and not isinstance(spec.get("dnsConfig"), dict):
        yield doc.diagnostic(VALUE, "dnsPolicy None needs a dnsConfig", (*base, "dnsPolicy"))
    for i, t in enumerate(_list(spec.get("tolerations"))):
        t = _dict(t)
        if t.get("operator") == "Exists" and t.get("value"):
            yield doc.diagnostic(VALUE, "a toleration with operator Exists has no value", (*base, "tolerations", i, "value"))
    yield from _container_combinations(doc, spec, base)


def _container_combinations(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for i, c in enumerate(_list(spec.get("initContainers"))):
        c = _dict(c)
        if c.get("restartPolicy") != "Always":  # a native sidecar may be probed
            for probe in PROBES:
                if probe in c:
                    yield doc.diagnostic(VALUE, f"{probe} may not be set on an init container (only on a sidecar: restartPolicy Always)", (*base, "initContainers", i, probe), key=True)
    for path, c in _walk(spec, (CONTAINERS, "*"), base):
        c = _dict(c)
        sc = _dict(c.get("securityContext"))
        if sc.get("privileged") is True and sc.get("allowPrivilegeEscalation") is False:
            yield doc.diagnostic(VALUE, "privileged: true needs allowPrivilegeEscalation (it cannot be false)", (*path, "securityContext", "allowPrivilegeEscalation"))
        if spec.get("hostNetwork") is True:
            for j, p in enumerate(_list(c.get("ports"))):
                p = _dict(p)
                if "hostPort" in p and p.get("hostPort") != p.get("containerPort"):
                    yield doc.diagnostic(VALUE, "with hostNetwork, hostPort must equal containerPort", (*path, "ports", j, "hostPort"))


def _selectors(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """Label selectors (ValidateLabelSelector): keys qualified names, matchLabels values label values."""
    places = [(path, sel) for kind in ("podAffinity", "podAntiAffinity") for path, sel in (
        *_walk(spec, ("affinity", kind, "requiredDuringSchedulingIgnoredDuringExecution", "*", "labelSelector"), base),
        *_walk(spec, ("affinity", kind, "preferredDuringSchedulingIgnoredDuringExecution", "*", "podAffinityTerm", "labelSelector"), base))]
    places += list(_walk(spec, ("topologySpreadConstraints", "*", "labelSelector"), base))
    for path, sel in places:
        yield from label_map(doc, _dict(sel).get("matchLabels"), (*path, "matchLabels"), "label selector")
        for i, e in enumerate(_list(_dict(sel).get("matchExpressions"))):
            key = _dict(e).get("key")
            why = names.qualified_key(key) if isinstance(key, str) else None
            if why:
                yield doc.diagnostic(VALUE, f"label selector key {key!r}: {why}", (*path, "matchExpressions", i, "key"))


def spec_shapes(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """One-of groups, references and combinations in one pod spec."""
    yield from _volumes(doc, spec, base)
    yield from _handlers(doc, spec, base)
    yield from _combinations(doc, spec, base)
    yield from _selectors(doc, spec, base)
    yield from spec_parts(doc, spec, base)


def pod_shapes(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """spec_shapes in every pod template."""
    for spec, base in template_specs(job):
        yield from spec_shapes(doc, spec, base)


RULES = (pod_shapes,)
