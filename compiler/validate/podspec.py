"""Names, keys, paths and resources in a pod template that only the API server checks.

The OpenAPI schema (kubecheck.py) types these fields; pkg/apis/core/validation bounds them,
so a value only it refuses passed lint and compile and failed the sync or the runtime's pod
create (review 21, round 3, 29 such inputs).  One table names each field and its rule:
- object names a pod refers to (ConfigMaps, Secrets, claims, the service account, the
  priority class) are DNS-1123 subdomains (ValidateConfigMapName, ValidateSecretName...);
- ConfigMap and Secret keys are `[-._a-zA-Z0-9]+` (IsConfigMapKey), an envFrom prefix an
  env name (IsEnvVarName);
- nodeSelector and toleration keys are qualified names, nodeSelector values label values;
- an image has no leading or trailing space (validateContainerCommon), and is a reference the kubelet can parse (distribution/reference); an env fieldRef names a
  field the downward API gives an env value; a probe's port name is an IANA service name; a
  host alias an IP; a sysctl a sysctl name; a node affinity key a qualified name;
- a subPath is relative and has no `..` (validateLocalDescendingPath);
- container names are unique across initContainers and containers, port names within a
  container (validateContainers, validateContainerPorts);
- resource names are standard or domain-qualified; an extended resource (a device such as
  nvidia.com/gpu) has a name its quota form keeps qualified (IsExtendedResourceName) and is a
  whole number with its limit set and any request equal to it; a hugepages-<size> value is a
  multiple of its size; a request is at most its limit (ValidateResourceRequirements).
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import Diagnostic
from ..kube.formats import is_quantity, quantity_value
from ..loader import Document, PathT
from . import names
from .groups import groups

CONTAINERS = "@containers"  # initContainers and containers
_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_STANDARD = re.compile(r"(cpu|memory|ephemeral-storage|hugepages-.+)")  # IsStandardContainerResourceName
_HUGEPAGES = "hugepages-"  # core.ResourceHugePagesPrefix
_QUOTA_PREFIX = "requests."  # core.DefaultResourceRequestsPrefix
_INT64_END = 2**63  # Quantity.Value() is an int64



def _config_key(key: str) -> str | None:
    if not key or len(key) > 253 or not _KEY.fullmatch(key) or key in (".", "..") or key.startswith(".."):
        return "must consist of letters, digits, '-', '_' or '.' (a ConfigMap or Secret key)"
    return None


def _env_prefix(prefix: str) -> str | None:
    return names.env_var_name(prefix) if prefix else None


def _name(value: str) -> str | None:
    return names.dns1123_subdomain(value) if value else None


# The env fields a fieldRef may name (pkg/apis/core/validation validEnvDownwardAPIFieldPathExpressions,
# spec.host converted to spec.nodeName first: ConvertDownwardAPIFieldLabel), and the label or
# annotation subscripts.
FIELD_PATHS = frozenset({"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.host", "spec.serviceAccountName",
                         "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"})
VOLUME_FIELD_PATHS = frozenset({"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations"})
_HEADER = re.compile(r"[-A-Za-z0-9]+")  # IsHTTPHeaderName
_SUBSCRIPT = re.compile(r"metadata\.(labels|annotations)\['[^']+'\]")
_SYSCTL = re.compile(r"([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?")


def _subscript(path: str) -> str | None:
    """Why the key of `metadata.labels['<key>']` or `metadata.annotations['<key>']` is refused
    (validateObjectFieldSelector: a qualified name, an annotation's lower-cased), or None; the
    caller has matched _SUBSCRIPT."""
    field, key = path.split("['", 1)
    key = key[:-2]
    why = names.qualified_key(key.lower() if field == "metadata.annotations" else key)
    return f"names the key {key!r}, whose {why}" if why else None


def _field_path(path: str) -> str | None:
    if _SUBSCRIPT.fullmatch(path):
        return _subscript(path)
    return None if path in FIELD_PATHS else f"is no field an env value can come from ({', '.join(sorted(FIELD_PATHS))}, or metadata.labels['...'])"


def _ip(text: str) -> str | None:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return "must be an IP address"
    return None


_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice")
# resourceFieldRef.resource an env value may read (validateContainerResourceFieldSelector; hugepages-<size> too)
_RESOURCE_FIELDS = ("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage")


def _one_of(value: str, allowed: tuple[str, ...]) -> str | None:
    return None if value in allowed else f"is not one of {', '.join(repr(a) for a in allowed if a)}"


def _local_path(path: str) -> str | None:
    """validateLocalNonReservedPath: relative, no '..' element, not starting with '..'."""
    if not path or path.startswith("/") or ".." in path.split("/"):
        return "must be a relative path without '..'"
    return None


def _descending(path: str) -> str | None:
    """validateLocalDescendingPath: not absolute, no '..' element ('' and '.' are the volume itself)."""
    return "must be a relative path without '..'" if path.startswith("/") or ".." in path.split("/") else None


def _host_path(path: str) -> str | None:
    """hostPath.path: required, no '..' element (validatePathNoBacksteps)."""
    return "must not be empty" if not path else "must not contain '..'" if ".." in path.split("/") else None


def _volume_field_path(path: str) -> str | None:
    """validVolumeDownwardAPIFieldPathExpressions: a file can hold only these (no IPs, no node name)."""
    if _SUBSCRIPT.fullmatch(path):
        return _subscript(path)
    return None if path in VOLUME_FIELD_PATHS else f"is no field a downwardAPI volume file can hold ({', '.join(sorted(VOLUME_FIELD_PATHS))}, or metadata.labels['...'])"


def _resource_field(resource: str) -> str | None:
    return None if resource in _RESOURCE_FIELDS or resource.startswith(("limits.hugepages-", "requests.hugepages-")) else _one_of(resource, _RESOURCE_FIELDS)
_NODE_TERMS = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", "*")
NODE_TERMS = (_NODE_TERMS, ("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution", "*", "preference"))
POD_TERMS = tuple(path for kind in ("podAffinity", "podAntiAffinity") for path in (
    ("affinity", kind, "requiredDuringSchedulingIgnoredDuringExecution", "*"),
    ("affinity", kind, "preferredDuringSchedulingIgnoredDuringExecution", "*", "podAffinityTerm")))
HANDLERS = (*((probe,) for probe in ("livenessProbe", "readinessProbe", "startupProbe")), ("lifecycle", "postStart"), ("lifecycle", "preStop"))
# The downwardAPI item lists: a volume's, and a projected volume's sources'.
DOWNWARD_ITEMS = (("volumes", "*", "downwardAPI", "items", "*"), ("volumes", "*", "projected", "sources", "*", "downwardAPI", "items", "*"))


NAME, VALUE = "FJ305", "FJ204"  # a name the API server refuses; any other value it refuses
# (path from the pod spec, '*' for each item, CONTAINERS for both container lists; rule; what it is; code)
def image_problem(image: str) -> str | None:
    """What the API server refuses (validateContainerCommon: leading or trailing whitespace), then
    what the kubelet cannot parse (hx17: `py torch` passed lint and ended in InvalidImageName)."""
    if image != image.strip():
        return "must not have leading or trailing spaces"
    why = names.image_pull_problem(image) if image else None  # no image at all: container_images
    return f"{why}: the kubelet cannot parse it (distribution/reference), so the pod would stay in InvalidImageName" if why else None


def _label_if_set(value: str) -> str | None:
    """A DNS-1123 label; "" is unset (ValidatePodSpec validates it only when len > 0)."""
    return names.dns1123_label(value) if value else None


FIELDS: tuple[tuple[tuple[str, ...], Callable[[str], str | None], str, str], ...] = (
    (("serviceAccountName",), _name, "serviceAccountName", NAME),
    (("priorityClassName",), _name, "priorityClassName", NAME),
    (("volumes", "*", "configMap", "name"), _name, "ConfigMap name", NAME),
    (("volumes", "*", "secret", "secretName"), _name, "Secret name", NAME),
    (("volumes", "*", "persistentVolumeClaim", "claimName"), _name, "claimName", NAME),
    (("tolerations", "*", "key"), lambda k: names.qualified_key(k) if k else None, "toleration key", VALUE),
    *(((CONTAINERS, "*", "env", "*", "valueFrom", ref, "name"), _name, f"{ref}.name", NAME) for ref in ("configMapKeyRef", "secretKeyRef")),
    *(((CONTAINERS, "*", "env", "*", "valueFrom", ref, "key"), _config_key, f"{ref}.key", VALUE) for ref in ("configMapKeyRef", "secretKeyRef")),
    *(((CONTAINERS, "*", "envFrom", "*", ref, "name"), _name, f"envFrom {ref}.name", NAME) for ref in ("configMapRef", "secretRef")),
    ((CONTAINERS, "*", "envFrom", "*", "prefix"), _env_prefix, "envFrom prefix", VALUE),
    ((CONTAINERS, "*", "image"), image_problem, "image", VALUE),
    ((CONTAINERS, "*", "volumeMounts", "*", "subPath"), _descending, "subPath", VALUE),
    ((CONTAINERS, "*", "env", "*", "valueFrom", "fieldRef", "fieldPath"), _field_path, "fieldPath", VALUE),
    *(((CONTAINERS, "*", probe, how, "port"), names.iana_svc_name, f"{probe} port name", VALUE) for probe in _PROBES for how in ("httpGet", "tcpSocket")),
    (("hostAliases", "*", "ip"), _ip, "hostAliases ip", VALUE),
    (("securityContext", "sysctls", "*", "name"), lambda n: None if _SYSCTL.fullmatch(n) else "is no sysctl name", "sysctl", VALUE),
    ((*_NODE_TERMS, "matchExpressions", "*", "key"), names.qualified_key, "node affinity key", VALUE),
    (("hostname",), _label_if_set, "hostname", VALUE),
    (("subdomain",), _label_if_set, "subdomain", VALUE),
    (("nodeName",), _name, "nodeName", VALUE),
    (("runtimeClassName",), _name, "runtimeClassName", NAME),
    (("hostAliases", "*", "hostnames", "*"), names.dns1123_subdomain, "hostAliases hostname", VALUE),
    (("dnsConfig", "nameservers", "*"), _ip, "dnsConfig nameserver", VALUE),
    (("readinessGates", "*", "conditionType"), names.qualified_key, "readinessGates conditionType", VALUE),
    (("volumes", "*", "nfs", "path"), lambda p: None if p.startswith("/") else "must be an absolute path", "nfs path", VALUE),
    (("volumes", "*", "hostPath", "path"), _host_path, "hostPath path", VALUE),
    (("volumes", "*", "hostPath", "type"), lambda t: _one_of(t, _HOST_PATH_TYPES), "hostPath type", VALUE),
    *(((("volumes", "*", source, "items", "*", "path"), _local_path, f"{source} item path", VALUE)) for source in ("configMap", "secret", "downwardAPI")),
    ((CONTAINERS, "*", "terminationMessagePolicy"), lambda t: _one_of(t, ("File", "FallbackToLogsOnError")), "terminationMessagePolicy", VALUE),
    ((CONTAINERS, "*", "resizePolicy", "*", "restartPolicy"), lambda t: _one_of(t, ("NotRequired", "RestartContainer")), "resizePolicy restartPolicy", VALUE),
    ((CONTAINERS, "*", "env", "*", "valueFrom", "resourceFieldRef", "resource"), _resource_field, "resourceFieldRef resource", VALUE),
    (("topologySpreadConstraints", "*", "whenUnsatisfiable"), lambda t: _one_of(t, ("DoNotSchedule", "ScheduleAnyway")), "whenUnsatisfiable", VALUE),
    *(((("affinity", kind, "requiredDuringSchedulingIgnoredDuringExecution", "*", "topologyKey"), lambda k: names.qualified_key(k) if k else "must not be empty", "topologyKey", VALUE)) for kind in ("podAffinity", "podAntiAffinity")),
    # review 21, round 5 (#3): pkg/apis/core/validation/validation.go, the function named per row
    ((CONTAINERS, "*", "env", "*", "valueFrom", "fieldRef", "apiVersion"), lambda v: _one_of(v, ("", "v1")), "fieldRef apiVersion", VALUE),  # validateObjectFieldSelector
    *(((*items, "fieldRef", "apiVersion"), lambda v: _one_of(v, ("", "v1")), "fieldRef apiVersion", VALUE) for items in DOWNWARD_ITEMS),
    *(((*items, "fieldRef", "fieldPath"), _volume_field_path, "downwardAPI volume fieldPath", VALUE) for items in DOWNWARD_ITEMS),  # validateDownwardAPIVolumeFile
    *(((*items, "path"), _local_path, "downwardAPI item path", VALUE) for items in DOWNWARD_ITEMS[1:]),
    *((("volumes", "*", "projected", "sources", "*", source, "items", "*", "path"), _local_path, f"projected {source} item path", VALUE) for source in ("configMap", "secret")),  # validateProjectionSources
    (("volumes", "*", "projected", "sources", "*", "serviceAccountToken", "path"), _local_path, "serviceAccountToken path", VALUE),
    (("volumes", "*", "gitRepo", "directory"), _descending, "gitRepo directory", VALUE),  # validateGitRepoVolumeSource
    ((CONTAINERS, "*", "volumeMounts", "*", "mountPropagation"), lambda v: _one_of(v, ("None", "HostToContainer", "Bidirectional")), "mountPropagation", VALUE),  # validateMountPropagation
    ((CONTAINERS, "*", "volumeMounts", "*", "recursiveReadOnly"), lambda v: _one_of(v, ("Disabled", "IfPossible", "Enabled")), "recursiveReadOnly", VALUE),  # validateMountRecursiveReadOnly
    *(((CONTAINERS, "*", *hook, "httpGet", "scheme"), lambda v: _one_of(v, ("", "HTTP", "HTTPS")), "httpGet scheme", VALUE) for hook in HANDLERS),  # validateHTTPGetAction ("" is defaulted to HTTP first: SetDefaults_HTTPGetAction)
    *(((CONTAINERS, "*", *hook, "httpGet", "httpHeaders", "*", "name"), lambda v: None if _HEADER.fullmatch(v) else "is no HTTP header name (letters, digits and '-')", "httpHeaders name", VALUE) for hook in HANDLERS),
    ((CONTAINERS, "*", "securityContext", "procMount"), lambda v: _one_of(v, ("Default", "Unmasked")), "procMount", VALUE),  # ValidateSecurityContext
    (("dnsConfig", "searches", "*"), lambda v: names.dns1123_subdomain(v.removesuffix(".")), "dnsConfig search", VALUE),  # validatePodDNSConfig
    (("schedulerName",), _name, "schedulerName", VALUE),  # ValidatePodSpec: a DNS-1123 subdomain
    (("schedulingGates", "*", "name"), names.qualified_key, "schedulingGates name", VALUE),  # validateSchedulingGates
    (("tolerations", "*", "value"), names.label_value, "toleration value", VALUE),  # ValidateTolerations
    (("topologySpreadConstraints", "*", "topologyKey"), lambda k: names.qualified_key(k) if k else None, "topologyKey", VALUE),  # "" is Required (podshape)
    *(((*terms, "matchFields", "*", "key"), lambda k: _one_of(k, ("metadata.name",)), "matchFields key", VALUE) for terms in NODE_TERMS),  # validateNodeFieldSelectorRequirement
    (((*NODE_TERMS[1], "matchExpressions", "*", "key"), names.qualified_key, "node affinity key", VALUE)),
    *(((*terms, "namespaces", "*"), names.dns1123_label, "namespace", VALUE) for terms in POD_TERMS),  # ValidateNamespaceName
)

# Numbers only the API server bounds: (path, least, most, what).
_PORT = (1, 65535)
_ID = (0, 2147483647)
_MODE = (0, 0o777)
NUMBERS: tuple[tuple[tuple[str, ...], int, int, str], ...] = (
    *((CONTAINERS, "*", probe, how, "port", *_PORT, f"{probe} port") for probe in _PROBES for how in ("httpGet", "tcpSocket", "grpc")),
    *((CONTAINERS, "*", "lifecycle", hook, how, "port", *_PORT, f"{hook} port") for hook in ("postStart", "preStop") for how in ("httpGet", "tcpSocket")),
    *((CONTAINERS, "*", probe, field, 0, _ID[1], f"{probe} {field}") for probe in _PROBES
      for field in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "failureThreshold")),
    # validateContainers: liveness and startup succeed once (0 is defaulted to 1); validateProbe: a grace period is > 0
    *((CONTAINERS, "*", probe, "successThreshold", 0, 1 if probe != "readinessProbe" else _ID[1], f"{probe} successThreshold") for probe in _PROBES),
    *((CONTAINERS, "*", probe, "terminationGracePeriodSeconds", 1, 2**63 - 1, f"{probe} terminationGracePeriodSeconds") for probe in ("livenessProbe", "startupProbe")),
    *((CONTAINERS, "*", "lifecycle", hook, "sleep", "seconds", 0, 2**63 - 1, f"{hook} sleep seconds") for hook in ("postStart", "preStop")),  # validateSleepAction
    *((*terms, "weight", 1, 100, "preferred term weight") for terms in (("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution", "*"),
      *(("affinity", kind, "preferredDuringSchedulingIgnoredDuringExecution", "*") for kind in ("podAffinity", "podAntiAffinity")))),
    (("topologySpreadConstraints", "*", "minDomains", 1, _ID[1], "minDomains")),  # validateMinDomains
    (("volumes", "*", "projected", "sources", "*", "serviceAccountToken", "expirationSeconds", 600, 2**32, "serviceAccountToken expirationSeconds")),  # validateProjectionSources
    *((*where, "securityContext", field, *_ID, field) for where in ((), (CONTAINERS, "*")) for field in ("runAsUser", "runAsGroup")),
    (("securityContext", "fsGroup", *_ID, "fsGroup")),
    (("securityContext", "supplementalGroups", "*", *_ID, "supplementalGroups")),
    *(("volumes", "*", source, "defaultMode", *_MODE, f"{source} defaultMode") for source in ("configMap", "secret", "downwardAPI", "projected")),
    *(("volumes", "*", source, "items", "*", "mode", *_MODE, f"{source} item mode") for source in ("configMap", "secret", "downwardAPI")),
    (("topologySpreadConstraints", "*", "maxSkew", 1, _ID[1], "maxSkew")),
    (("terminationGracePeriodSeconds", 0, 2**63 - 1, "terminationGracePeriodSeconds")),
)


def _walk(value: Any, pattern: tuple[str, ...], at: PathT) -> list[tuple[PathT, Any]]:
    """(path, value) of every field the pattern names under `value`, in document order.

    Level by level, without a generator per step: lint walks some 40 patterns through each pod
    spec, and an overlay's fan-out check has 2 000 specs to walk (issue 21: 1 s of CPU)."""
    found: list[tuple[PathT, Any]] = [(at, value)]
    for head in pattern:
        below: list[tuple[PathT, Any]] = []
        for path, here in found:
            if head == "*":
                if isinstance(here, list):
                    below.extend(((*path, i), item) for i, item in enumerate(here))
            elif head == CONTAINERS:
                for field in ("initContainers", "containers"):
                    below.append(((*path, field), here.get(field) if isinstance(here, dict) else None))
            elif isinstance(here, dict) and head in here:
                below.append(((*path, head), here[head]))
        if not below:
            return below
        found = below
    return found


def resource_name(name: str) -> str | None:
    """Why a container's resource name is refused, or None (validateContainerResourceName): a
    qualified name; without a domain a standard one; with a domain outside kubernetes.io/ an
    extended resource (helper.IsExtendedResourceName: no `requests.` prefix, and `requests.<name>`,
    its quota name, is a qualified name too)."""
    why = names.qualified_key(name)
    if why:
        return why
    if "/" not in name:
        return None if _STANDARD.fullmatch(name) else "is no standard resource and has no domain (e.g. nvidia.com/gpu)"
    if "kubernetes.io/" in name:  # helper.IsNativeResource
        return None
    if name.startswith(_QUOTA_PREFIX):
        return f"is no extended resource name: it may not start with {_QUOTA_PREFIX!r} (the quota form)"
    why = names.qualified_key(_QUOTA_PREFIX + name)
    return f"is no extended resource name: its quota form {_QUOTA_PREFIX + name!r} is no qualified name: {why}" if why else None


def hugepages_value(name: str, value: Any) -> str | None:
    """Why a hugepages-<size> value is refused, or None (validateResourceQuantityHugePageValue,
    helper.IsHugePageResourceValueDivisible; AllowIndivisibleHugePagesValues is false on create):
    the size is a positive whole quantity and the value, rounded up (Quantity.Value), a multiple
    of it.  A value or size beyond int64 is left to the API server."""
    if not name.startswith(_HUGEPAGES):
        return None
    text = name.removeprefix(_HUGEPAGES)
    if not is_quantity(text):  # HugePageSizeFromResourceName: resource.ParseQuantity fails
        return f"is not a positive integer multiple of {name}: {text!r} is no page size (e.g. hugepages-2Mi)"
    size, number = quantity_value(text), quantity_value(value)
    if size is None or number is None or size.copy_abs() >= _INT64_END or number.copy_abs() >= _INT64_END:
        return None
    if size <= 0 or math.ceil(size * 1000) % 1000:  # pageSize.Sign() <= 0, MilliValue() % 1000
        return f"is not a positive integer multiple of {name}: {text!r} is no whole, positive page size"
    return None if math.ceil(number) % math.ceil(size) == 0 else f"is not a positive integer multiple of {name}"


def _resources(doc: Document, res: Any, where: PathT) -> Iterator[Diagnostic]:
    """Names, whole devices, limits for devices, requests at most their limits."""
    res = res if isinstance(res, dict) else {}
    requests = res.get("requests") if isinstance(res.get("requests"), dict) else {}
    limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
    given = {*requests, *limits}
    huge = sorted(str(n) for n in given if str(n).startswith("hugepages-"))
    if huge and not given & {"cpu", "memory"}:
        yield doc.diagnostic(VALUE, f"{huge[0]} without cpu or memory: the API server needs one of them with hugepages", where, key=True)
    for kind, given in (("requests", requests), ("limits", limits)):
        for name, value in given.items():
            at = (*where, kind, name)
            if not isinstance(name, str):
                continue
            why = resource_name(name)
            if why:
                yield doc.diagnostic(VALUE, f"resource name {name!r} {why}", at, key=True)
                continue
            why = hugepages_value(name, value)
            if why:
                yield doc.diagnostic(VALUE, f"{kind}.{name} {value} {why}", at)
            extended = "/" in name and "kubernetes.io/" not in name  # helper.IsNativeResource
            fixed = extended or name.startswith("hugepages-")  # IsOvercommitAllowed: false for both
            number = quantity_value(value)
            if extended and number is not None and number != number.to_integral_value():
                yield doc.diagnostic(VALUE, f"{kind}.{name} is {value}: a device is counted in whole units", at)
            elif fixed and kind == "requests" and name not in limits:
                yield doc.diagnostic(VALUE, f"requests.{name} without limits.{name}: the API server needs its limit (it cannot be overcommitted)", at, key=True, hint=f"set limits.{name} instead")
            elif kind == "requests" and name in limits:
                limit = quantity_value(limits[name])
                if number is not None and limit is not None and (number > limit or (fixed and number != limit)):
                    yield doc.diagnostic(VALUE, f"requests.{name} {value} is {'not' if fixed else 'more than'} its limit {limits[name]}{' (it cannot be overcommitted: they must be equal)' if fixed else ''}", at)


def names_of(items: Iterable[Any]) -> set[str]:
    """The string `name`s of these items (any other value is the schema's to report)."""
    return {item["name"] for item in items if isinstance(item, dict) and isinstance(item.get("name"), str)}


def _uniqueness(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """Container names across both lists, port names within each container."""
    init = names_of(spec.get("initContainers") if isinstance(spec.get("initContainers"), list) else [])
    for path, c in _walk(spec, (CONTAINERS, "*"), base):
        if not isinstance(c, dict):
            continue
        name = c.get("name")
        if path[-2] == "containers" and isinstance(name, str) and name in init:  # twice in one list: FJ405 (the schema's list key)
            yield doc.diagnostic(VALUE, f"container name {name!r} is also an init container's (the two lists share their names)", (*path, "name"))
        ports: set[str] = set()
        for i, p in enumerate(c.get("ports") if isinstance(c.get("ports"), list) else []):
            port = p.get("name") if isinstance(p, dict) else None
            if isinstance(port, str) and port:
                if port in ports:
                    yield doc.diagnostic(VALUE, f"port name {port!r} is used twice in container {name!r}", (*path, "ports", i, "name"))
                ports.add(port)
        yield from _resources(doc, c.get("resources"), (*path, "resources"))


def label_map(doc: Document, labels: Any, at: PathT, what: str) -> Iterator[Diagnostic]:
    """A mapping of label keys (qualified names) to label values: a nodeSelector, a matchLabels."""
    for key, value in (labels.items() if isinstance(labels, dict) else ()):
        why = names.qualified_key(key) if isinstance(key, str) else None
        if why:
            yield doc.diagnostic(VALUE, f"{what} key {key!r}: {why}", (*at, key), key=True)
        why = names.label_value(value) if isinstance(value, str) else None
        if why:
            yield doc.diagnostic(VALUE, f"{what} value {value!r} {why}", (*at, key))


def _node_selector(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    yield from label_map(doc, spec.get("nodeSelector"), (*base, "nodeSelector"), "nodeSelector")


# Every FIELDS and NUMBERS pattern as one tree of field names, walked once per pod spec: applied
# one by one, the ~270 patterns cost 0.5 ms a spec, and an overlay's fan-out check validates
# 2 000 specs (issue 21: a run within 1 s of CPU).  A leaf holds the indexes of its patterns.
_Trie = dict[str, Any]
_LEAF = ""  # no field is named "" in a pattern


def _trie(patterns: Iterable[tuple[str, ...]]) -> _Trie:
    root: _Trie = {}
    for index, pattern in enumerate(patterns):
        node = root
        for head in pattern:
            node = node.setdefault(head, {})
        node.setdefault(_LEAF, []).append(index)
    return root


def _matches(value: Any, node: _Trie, at: PathT, out: list[tuple[int, PathT, Any]]) -> None:
    """Append (pattern index, path, value) for every pattern of `node` under value, in the order
    _walk finds each pattern's fields."""
    for head, child in node.items():
        if head == _LEAF:
            out.extend((index, at, value) for index in child)
        elif head == "*":
            for i, item in enumerate(value if isinstance(value, list) else []):
                _matches(item, child, (*at, i), out)
        elif head == CONTAINERS:
            for field in ("initContainers", "containers"):
                _matches(value.get(field) if isinstance(value, dict) else None, child, (*at, field), out)
        elif isinstance(value, dict) and head in value:
            _matches(value[head], child, (*at, head), out)


_CHECKS: tuple[tuple[str, Any], ...] = (*(("field", f) for f in FIELDS), *(("number", n) for n in NUMBERS))
_TREE = _trie(tuple(check[0]) if kind == "field" else tuple(check[:-3]) for kind, check in _CHECKS)


def spec_values(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """Every field of FIELDS and NUMBERS, resources, uniqueness and the nodeSelector, in one pod spec."""
    found: list[tuple[int, PathT, Any]] = []
    _matches(spec, _TREE, base, found)
    found.sort(key=lambda m: m[0])  # stable: FIELDS then NUMBERS, each pattern's fields in walk order
    for index, path, value in found:
        kind, check = _CHECKS[index]
        if kind == "field":
            _pattern, rule, what, code = check
            why = rule(value) if isinstance(value, str) else None
            if why:
                yield doc.diagnostic(code, f"{what} {value!r} {why}", path)
        else:
            *_pattern, least, most, what = check
            if isinstance(value, int) and not isinstance(value, bool) and not least <= value <= most:
                yield doc.diagnostic(VALUE, f"{what} {value} must be between {least} and {most}{' (octal 0777)' if most == 0o777 else ''}", path)
    yield from _uniqueness(doc, spec, base)
    yield from _node_selector(doc, spec, base)


def template_specs(job: Any) -> Iterator[tuple[dict[str, Any], PathT]]:
    """(spec, its path) of every pod template the job writes."""
    for g in groups(job):
        template = g.template if isinstance(g.template, dict) else {}
        yield (template.get("spec") if isinstance(template.get("spec"), dict) else {}), (*g.template_path, "spec")


def pod_specs(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """spec_values in every pod template."""
    for spec, base in template_specs(job):
        yield from spec_values(doc, spec, base)


RULES = (pod_specs,)
