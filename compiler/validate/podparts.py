"""Required, forbidden, unique and paired fields of a pod spec, as only the API server checks them.

The OpenAPI schema marks few fields required and none unique or paired, so a pod template
pkg/apis/core/validation refuses passed lint (review 21, round 5, #3: 55 inputs).  Each table
row names the upstream function (pkg/apis/core/validation/validation.go) whose rule it ports:
- REQUIRED: a reference or path the API server refuses empty (or missing, where the schema
  lets it be left out);
- FORBIDDEN: a field a pod template may not set at all;
- UNIQUE: a list whose items may not share a key (sysctls, host ports, ...);
- OPERATORS: what values a selector requirement's operator takes;
- LIMITS: list lengths (dnsConfig);
- DIVISORS: the divisors a resourceFieldRef takes for each resource;
and PAIRS: two fields of one object that do not go together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import Diagnostic
from ..kube.formats import is_quantity, quantity_string
from ..loader import Document, PathT
from .podspec import (
    CONTAINERS,
    DOWNWARD_ITEMS,
    NODE_TERMS,
    POD_TERMS,
    VALUE,
    _walk,
    names_of,
    template_specs,
)

# (object, field, also when missing): missing_too only where the schema does not require the field
# (it says so itself, FJ203), else an empty string alone is reported.
REQUIRED: tuple[tuple[tuple[str, ...], str, bool], ...] = (
    (("volumes", "*", "secret"), "secretName", True),  # validateSecretVolumeSource
    (("volumes", "*", "configMap"), "name", True),  # validateConfigMapVolumeSource
    *((("volumes", "*", "projected", "sources", "*", source), "name", True) for source in ("configMap", "secret")),  # validateProjectionSources
    *(((CONTAINERS, "*", "env", "*", "valueFrom", ref), "name", True) for ref in ("configMapKeyRef", "secretKeyRef")),  # validate*KeySelector
    *(((CONTAINERS, "*", "envFrom", "*", ref), "name", True) for ref in ("configMapRef", "secretRef")),  # validate*EnvSource
    (("volumes", "*", "csi"), "driver", False),  # validateCSIVolumeSource
    (("volumes", "*", "ephemeral"), "volumeClaimTemplate", True),  # validateEphemeralVolumeSource
    *(((*items, "resourceFieldRef"), "containerName", True) for items in DOWNWARD_ITEMS),  # validateDownwardAPIVolumeFile
    ((CONTAINERS, "*", "volumeMounts", "*"), "mountPath", False),  # validateVolumeMounts
    ((CONTAINERS, "*", "volumeDevices", "*"), "devicePath", False),  # validateVolumeDevices
    (("dnsConfig", "options", "*"), "name", True),  # validatePodDNSConfig
    (("topologySpreadConstraints", "*"), "topologyKey", False),  # validateTopologyKey
)
# (field, why it may not be set)
FORBIDDEN: tuple[tuple[tuple[str, ...], str], ...] = (
    (("containers", "*", "restartPolicy"), "may not be set on a container, only on an init container (a sidecar)"),  # validateContainers
    ((CONTAINERS, "*", "readinessProbe", "terminationGracePeriodSeconds"), "must not be set for a readinessProbe"),  # validateReadinessProbe
)


def _host_port(p: Any) -> str | None:
    """AccumulateUniqueHostPorts' key: protocol, hostIP and hostPort (one port on two host IPs is two)."""
    if not isinstance(p, dict) or p.get("hostPort") in (None, 0):
        return None
    return f"{p['hostPort']}/{p.get('protocol') or 'TCP'}" + (f" on {p['hostIP']}" if isinstance(p.get("hostIP"), str) and p["hostIP"] else "")


def _field(name: str) -> Callable[[Any], str | None]:
    return lambda item: item.get(name) if isinstance(item, dict) and isinstance(item.get(name), str) else None


# (scope, items under it, key of an item, what): no two items of one scope share a key.
UNIQUE: tuple[tuple[tuple[str, ...], tuple[str, ...], Callable[[Any], str | None], str], ...] = (
    # checkHostPortConflicts: the regular containers together, each init container alone ("init containers run one-by-one")
    ((), ("containers", "*", "ports", "*"), _host_port, "hostPort"),
    (("initContainers", "*"), ("ports", "*"), _host_port, "hostPort"),
    ((), ("securityContext", "sysctls", "*"), _field("name"), "sysctl"),  # validateSysctls
    ((), ("schedulingGates", "*"), _field("name"), "scheduling gate"),  # validateSchedulingGates
    ((CONTAINERS, "*"), ("resizePolicy", "*"), _field("resourceName"), "resizePolicy resourceName"),  # validateResizePolicy
)
# operator -> how many values it takes: (least, most)
_ANY = 2**31
SELECTOR_OPERATORS = {"In": (1, _ANY), "NotIn": (1, _ANY), "Exists": (0, 0), "DoesNotExist": (0, 0)}  # ValidateLabelSelectorRequirement
NODE_OPERATORS = {**SELECTOR_OPERATORS, "Gt": (1, 1), "Lt": (1, 1)}  # ValidateNodeSelectorRequirement
OPERATORS: tuple[tuple[tuple[str, ...], dict[str, tuple[int, int]]], ...] = (
    *(((*terms, "matchExpressions", "*"), NODE_OPERATORS) for terms in NODE_TERMS),
    *(((*terms, "matchFields", "*"), {"In": (1, 1), "NotIn": (1, 1)}) for terms in NODE_TERMS),  # validateNodeFieldSelectorRequirement
    *(((*terms, "labelSelector", "matchExpressions", "*"), SELECTOR_OPERATORS) for terms in POD_TERMS),
    (("topologySpreadConstraints", "*", "labelSelector", "matchExpressions", "*"), SELECTOR_OPERATORS),
)
LIMITS = ((("dnsConfig", "nameservers"), 3), (("dnsConfig", "searches"), 32))  # validatePodDNSConfig
_MEMORY = frozenset({"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"})
# validContainerResourceDivisorFor{CPU,Memory,EphemeralStorage,HugePages}: the resource (after
# limits./requests.) -> the Quantity.String() forms of the divisors validateContainerResourceDivisor takes
DIVISORS = {"cpu": frozenset({"1m", "1"}), "memory": _MEMORY, "ephemeral-storage": _MEMORY}
RESOURCE_FIELD_REFS = ((CONTAINERS, "*", "env", "*", "valueFrom", "resourceFieldRef"), *((*items, "resourceFieldRef") for items in DOWNWARD_ITEMS))


_PROFILES = tuple(where for at in ((), (CONTAINERS, "*")) for where in ((*at, "securityContext", "seccompProfile"), (*at, "securityContext", "appArmorProfile")))
# (object, when it is refused, the field to point at, why): two fields of one object that do not go together
PAIRS: tuple[tuple[tuple[str, ...], Callable[[dict[str, Any]], bool], str, str], ...] = (
    ((CONTAINERS, "*", "volumeMounts", "*"), lambda m: bool(m.get("subPath")) and bool(m.get("subPathExpr")), "subPathExpr", "subPath and subPathExpr are mutually exclusive"),  # validateVolumeMounts
    ((CONTAINERS, "*", "volumeMounts", "*"), lambda m: m.get("recursiveReadOnly") not in (None, "", "Disabled") and m.get("readOnly") is not True, "recursiveReadOnly",
     "recursiveReadOnly needs readOnly: true"),  # validateMountRecursiveReadOnly
    ((CONTAINERS, "*", "volumeMounts", "*"), lambda m: m.get("recursiveReadOnly") not in (None, "", "Disabled") and m.get("mountPropagation") not in (None, "None"), "mountPropagation",
     "recursiveReadOnly is taken only with mountPropagation None or unset"),  # validateMountRecursiveReadOnly
    (("tolerations", "*"), lambda t: not t.get("key") and t.get("operator") != "Exists", "operator", "a toleration without a key must have operator Exists"),  # ValidateTolerations (no default)
    (("tolerations", "*"), lambda t: t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute", "tolerationSeconds", "tolerationSeconds is taken only with effect NoExecute"),
    (("topologySpreadConstraints", "*"), lambda c: c.get("minDomains") is not None and c.get("whenUnsatisfiable") != "DoNotSchedule", "minDomains",
     "minDomains is taken only with whenUnsatisfiable DoNotSchedule"),  # validateMinDomains
    *((where, lambda p: p.get("type") == "Localhost" and not p.get("localhostProfile"), "type", f"a Localhost {where[-1]} needs localhostProfile") for where in _PROFILES),  # validate*ProfileField
    *((where, lambda p: p.get("type") != "Localhost" and p.get("localhostProfile") is not None, "localhostProfile", f"localhostProfile is taken only with a Localhost {where[-1]}") for where in _PROFILES),
)


def _pairs(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for pattern, refused, field, why in PAIRS:
        for path, obj in _walk(spec, pattern, base):
            if isinstance(obj, dict) and refused(obj):
                yield doc.diagnostic(VALUE, why, (*path, field), key=field not in obj)


def _references(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """A container's resources.claims name pod.spec.resourceClaims; no volume is both mounted and a device."""
    claims = names_of(item for _, item in _walk(spec, ("resourceClaims", "*"), base))
    for path, c in _walk(spec, (CONTAINERS, "*"), base):
        for at, claim in _walk(c, ("resources", "claims", "*"), path):
            name = _dict(claim).get("name")
            if isinstance(name, str) and name not in claims:  # validateResourceClaimNames
                yield doc.diagnostic(VALUE, f"resource claim {name!r} is none of pod.spec.resourceClaims ({', '.join(sorted(map(str, claims))) or 'none'})", (*at, "name"))
        mounted = names_of(m for _, m in _walk(c, ("volumeMounts", "*"), path))
        for at, device in _walk(c, ("volumeDevices", "*"), path):
            name = _dict(device).get("name")
            if isinstance(name, str) and name in mounted:  # validateVolumeDevices
                yield doc.diagnostic(VALUE, f"volume {name!r} is both mounted and a device in this container", (*at, "name"))
    windows = [at for pattern in (("securityContext", "windowsOptions", "hostProcess"), (CONTAINERS, "*", "securityContext", "windowsOptions", "hostProcess"))
               for at, v in _walk(spec, pattern, base) if v is True]
    if windows and spec.get("hostNetwork") is not True:  # validateWindowsHostProcessPod
        yield doc.diagnostic(VALUE, "hostProcess containers need hostNetwork: true", windows[0])


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _required(doc: Document, spec: dict[str, Any], base: PathT, missing: bool = False) -> Iterator[Diagnostic]:
    """REQUIRED fields given empty, or (`missing`) left out."""
    for pattern, field, missing_too in REQUIRED:
        for path, obj in _walk(spec, pattern, base):
            if isinstance(obj, dict) and (obj.get(field) is None and missing_too if missing else obj.get(field) == ""):
                yield doc.diagnostic(VALUE, f"{pattern[-1] if pattern[-1] != '*' else pattern[-2]}.{field} is required: the API server refuses it {'unset' if missing else 'empty'}", (*path, field), key=missing)


def missing_fields(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """REQUIRED fields left out of a pod template; a template rule (rules.TEMPLATE_RULES), since
    a misspelt field (FJ400) already says the same."""
    for spec, base in template_specs(job):
        yield from _required(doc, spec, base, missing=True)


def _forbidden(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for pattern, why in FORBIDDEN:
        for path, value in _walk(spec, pattern, base):
            if value is not None:
                yield doc.diagnostic(VALUE, f"{pattern[-1]} {why}", path, key=True)


def _unique(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for scope, items, key, what in UNIQUE:
        for at, obj in _walk(spec, scope, base):
            seen: set[str] = set()
            for path, item in _walk(obj, items, at):
                value = key(item)
                if value is not None and value in seen:
                    yield doc.diagnostic(VALUE, f"{what} {value} is given twice", path)
                if value is not None:
                    seen.add(value)


def _operators(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for pattern, table in OPERATORS:
        for path, req in _walk(spec, pattern, base):
            req = _dict(req)
            op, values = req.get("operator"), req.get("values")
            count = len(values) if isinstance(values, list) else 0
            if isinstance(op, str) and op in table and not table[op][0] <= count <= table[op][1]:  # another operator: the schema's enum (FJ402)
                least, most = table[op]
                need = "no values" if most == 0 else "exactly one value" if least == most else "at least one value"
                yield doc.diagnostic(VALUE, f"operator {op} takes {need}, not {count}", (*path, "values" if "values" in req else "operator"), key="values" not in req)


def _limits(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    for pattern, most in LIMITS:
        for path, items in _walk(spec, pattern, base):
            if isinstance(items, list) and len(items) > most:
                yield doc.diagnostic(VALUE, f"{pattern[-1]} holds {len(items)} entries: the API server takes at most {most}", path, key=True)


def _divisors(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """validateContainerResourceDivisor: it looks divisor.String() up in a set of strings, so "1024",
    "1e3", "+1" and "01" (kept as written by ParseQuantity) are refused where 1Ki, 1k and 1 are taken."""
    for pattern in RESOURCE_FIELD_REFS:
        for path, ref in _walk(spec, pattern, base):
            ref = _dict(ref)
            resource = str(ref.get("resource", "")).partition(".")[2]
            allowed = DIVISORS.get("memory" if resource.startswith("hugepages-") else resource)
            divisor = ref.get("divisor")
            if not allowed or type(divisor) not in (str, int, float) or not is_quantity(divisor):  # else the schema's finding
                continue
            shown = quantity_string(divisor)  # None: ParseQuantity fails (ErrNumeric: 19 digits past int64)
            if shown != "0" and shown not in allowed and (shown is not None or isinstance(divisor, str)):  # 0 is unset (defaulted to 1)
                read = f" (the API server reads it as {shown!r})" if shown is not None and shown != str(ref["divisor"]).strip() else ""
                yield doc.diagnostic(VALUE, f"divisor {ref['divisor']} is not taken for {ref['resource']}{read}: {'1m or 1' if resource == 'cpu' else '1 or a power of 1000 or 1024 (1, 1Ki, 1M, ...)'}", (*path, "divisor"))


def _sleeps(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """validateSleepAction: a hook's sleep may not outlast terminationGracePeriodSeconds (defaulted to 30)."""
    grace = spec.get("terminationGracePeriodSeconds")
    grace = 30 if grace is None else grace  # SetDefaults_PodSpec: a nil (absent or null) grace period is 30
    if type(grace) is not int:  # a wrong type is the schema's finding
        return
    for hook in ("postStart", "preStop"):
        for path, seconds in _walk(spec, (CONTAINERS, "*", "lifecycle", hook, "sleep", "seconds"), base):
            if type(seconds) is int and seconds > grace:
                yield doc.diagnostic(VALUE, f"{hook} sleep seconds {seconds} must be at most terminationGracePeriodSeconds ({grace})", path)


PARTS = (_required, _forbidden, _unique, _operators, _limits, _divisors, _pairs, _sleeps, _references)


def spec_parts(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """Every table of this module over one pod spec."""
    for check in PARTS:
        yield from check(doc, spec, base)


RULES = (missing_fields,)
