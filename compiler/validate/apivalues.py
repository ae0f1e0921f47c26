"""Values the API server refuses, or that break what flatjob renders from them, caught at lint.

The Kubernetes OpenAPI schema (kubecheck.py) types a field but does not bound it; the API
server's validation does (pkg/apis/core/validation).  A value only it refuses passes lint,
compiles, and then fails the Argo CD or Flux sync, or the runtime's pod create:
- ports (a container's containerPort and hostPort, a GenericJob Service's port and
  targetPort) are 1-65535 (ValidatePortNumOrName: "must be between 1 and 65535");
- a GenericJob's Service ports as ValidateService checks them (review 21, round 5, #5): names
  and {port, protocol} pairs unique, every port named when there are two or more, a
  targetPort name an IANA service name, an appProtocol a qualified name, and no nodePort on
  the headless ClusterIP Services flatjob renders;
- a pod's activeDeadlineSeconds is at least 1 (validatePodSpec);
- resource requests and limits are not negative (ValidateResourceQuantityValue: "must be
  greater than or equal to 0"); `nvidia.com/gpu: -1` also rendered `--nproc_per_node=-1`;
- the T9k queue becomes the `scheduler.tensorstack.dev/queue` label: a label value;
- flatjob's own `flatjob.dev/` labels and annotations on a pod template would be read by the
  runtime as its own (an attempt, `stopped`), so they are refused there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..errors import Diagnostic, Severity
from ..loader import Document, PathT
from . import names
from .groups import groups
from .podspec import _walk

PORT_RANGE = (1, 65535)
# Quantities outside a container's resources that may not be negative: (field, what).
QUANTITIES = ((("volumes", "*", "emptyDir", "sizeLimit"), "emptyDir sizeLimit"),)  # validateVolumeSource: "must be a valid resource quantity"
RESERVED_PREFIX = "flatjob.dev/"


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _negative(value: Any) -> bool:
    """A quantity below zero: a negative number, or a string with a leading minus."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value < 0
    return isinstance(value, str) and value.strip().startswith("-")


def _port(doc: Document, value: Any, where: PathT, what: str, optional: bool = False) -> Iterator[Diagnostic]:
    if isinstance(value, bool) or not isinstance(value, int) or (optional and value == 0):
        return  # a name (targetPort), or a type the schema reports
    low, high = PORT_RANGE
    if not low <= value <= high:
        yield doc.diagnostic("FJ204", f"{what} {value} is not a port: the API server takes {low}-{high}", where)


def _container(doc: Document, c: dict[str, Any], where: PathT) -> Iterator[Diagnostic]:
    for j, p in enumerate(_items(c.get("ports"))):
        if isinstance(p, dict):
            yield from _port(doc, p.get("containerPort"), (*where, "ports", j, "containerPort"), "containerPort")
            yield from _port(doc, p.get("hostPort"), (*where, "ports", j, "hostPort"), "hostPort", optional=True)
    resources = c.get("resources") if isinstance(c.get("resources"), dict) else {}
    for kind in ("requests", "limits"):
        amounts = resources.get(kind)
        for name, value in (amounts.items() if isinstance(amounts, dict) else ()):
            if _negative(value):
                yield doc.diagnostic("FJ204", f"{kind}.{name} is {value}: the API server takes no negative quantity", (*where, "resources", kind, name))


def _reserved(doc: Document, meta: Any, where: PathT) -> Iterator[Diagnostic]:
    for field in ("labels", "annotations"):
        given = meta.get(field) if isinstance(meta, dict) else None
        for key in given if isinstance(given, dict) else ():
            if isinstance(key, str) and key.startswith(RESERVED_PREFIX):
                yield doc.diagnostic(
                    "FJ313", f"{key}: {RESERVED_PREFIX} {field} are flatjob's own; on a pod the runtime would take it for one it set", (*where, field, key),
                    key=True, hint="use a key of your own domain",
                )


def _reserved_gates(doc: Document, spec: dict[str, Any], where: PathT) -> Iterator[Diagnostic]:
    """flatjob.dev/ scheduling gates: flatjob adds its release gate to every pod template, so the
    same one again is a duplicate the API server refuses, and the runtime's release removes one
    of the two only (hx13)."""
    for i, gate in enumerate(_items(spec.get("schedulingGates"))):
        name = gate.get("name") if isinstance(gate, dict) else None
        if isinstance(name, str) and name.startswith(RESERVED_PREFIX):
            yield doc.diagnostic(
                "FJ204", f"scheduling gate {name}: {RESERVED_PREFIX} gates are flatjob's own; it gates every pod itself until the runtime releases the gang",
                (*where, "schedulingGates", i, "name"), hint="remove it, or use a gate of your own domain",
            )


def spec_numbers(doc: Document, spec: dict[str, Any], base: PathT) -> Iterator[Diagnostic]:
    """Ports, the deadline and quantities in one pod spec."""
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool) and deadline < 1:
        yield doc.diagnostic("FJ204", f"activeDeadlineSeconds {deadline}: the API server takes 1 or more", (*base, "activeDeadlineSeconds"))
    for field in ("initContainers", "containers"):
        for i, c in enumerate(_items(spec.get(field))):
            if isinstance(c, dict):
                yield from _container(doc, c, (*base, field, i))
    for pattern, what in QUANTITIES:
        for path, value in _walk(spec, pattern, base):
            if _negative(value):
                yield doc.diagnostic("FJ204", f"{what} is {value}: the API server takes no negative quantity", path)


def pod_templates(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """Reserved keys and gates, and spec_numbers, in every pod template."""
    for g in groups(job):
        template = g.template if isinstance(g.template, dict) else {}
        spec = template.get("spec") if isinstance(template.get("spec"), dict) else {}
        yield from _reserved(doc, template.get("metadata"), (*g.template_path, "metadata"))
        yield from _reserved_gates(doc, spec, (*g.template_path, "spec"))
        yield from spec_numbers(doc, spec, (*g.template_path, "spec"))


# ServicePort fields ValidateService checks by format: (field, rule).  The job's Service and each
# per-replica Service are headless ClusterIP Services, which take no nodePort.
SERVICE_PORT_FIELDS: tuple[tuple[str, Callable[[Any], str | None]], ...] = (
    ("targetPort", lambda v: names.iana_svc_name(v) if isinstance(v, str) else None),  # validateServicePort: IsValidPortName
    ("appProtocol", lambda v: names.qualified_key(v) if isinstance(v, str) else None),  # validateServicePort: IsQualifiedName
    ("nodePort", lambda v: "may not be used when the Service's type is ClusterIP (flatjob's Services are headless)" if v not in (None, 0) else None),
)
# What two ports of one Service may not share (ValidateService: "Duplicate value"): (what, key).
SERVICE_PORT_UNIQUE: tuple[tuple[str, Callable[[dict[str, Any]], str | None]], ...] = (
    ("name", lambda p: p["name"] if isinstance(p.get("name"), str) and p["name"] else None),  # another type is the schema's finding
    ("port and protocol", lambda p: f"{p['port']}/{p.get('protocol') or 'TCP'}" if isinstance(p.get("port"), int) else None),
)


def service_ports(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """A GenericJob's per-replica Service ports, as ValidateService checks them."""
    service = getattr(job.spec, "service", None)
    ports = [p if isinstance(p, dict) else {} for p in getattr(service, "ports", None) or []]  # raw Kubernetes ServicePorts
    seen: dict[str, set[str]] = {what: set() for what, _ in SERVICE_PORT_UNIQUE}
    for i, data in enumerate(ports):
        where = ("spec", "service", "ports", i)
        yield from _port(doc, data.get("port"), (*where, "port"), "port")
        yield from _port(doc, data.get("targetPort"), (*where, "targetPort"), "targetPort", optional=True)  # 0: the API server takes port
        for field, rule in SERVICE_PORT_FIELDS:
            why = rule(data.get(field))
            if why:
                yield doc.diagnostic("FJ204", f"{field} {data[field]!r} {why}", (*where, field))
        target = data.get("targetPort")
        if target not in (None, 0, "") and target != data.get("port") and isinstance(data.get("port"), int):
            yield doc.diagnostic(
                "FJ350", f"targetPort {target!r} is not where peers connect: the replica Services are headless (their names resolve to the pod's IP, with no port "
                f"translation), so <job>-<type>-<rank>:$(service.port[{data.get('name') or '...'}]) reaches port {data['port']} of the pod",
                (*where, "targetPort"), severity=Severity.WARNING, hint="give port the port the program listens on, and leave targetPort out",
            )
        if len(ports) > 1 and not data.get("name"):
            yield doc.diagnostic("FJ204", "a Service port must be named when the Service has more than one", where, key=True, hint="add name: <port name>")
        for what, key in SERVICE_PORT_UNIQUE:
            value = key(data)
            if value is not None and value in seen[what]:
                yield doc.diagnostic("FJ204", f"another port of the Service has the same {what} ({value})", (*where, "name" if what == "name" else "port"))
            seen[what].add(value)


def queues(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """The T9k queues, which become a label value on the pods (and the TensorBoard pod)."""
    for base, sched in (
        (("spec", "scheduler"), getattr(job.spec, "scheduler", None)),
        (("spec", "tensorboardSpec", "scheduler"), getattr(getattr(job.spec, "tensorboard_spec", None), "scheduler", None)),
    ):
        t9k = getattr(sched, "t9k_scheduler", None)
        queue = getattr(t9k, "queue", None)
        why = names.label_value(queue) if isinstance(queue, str) else None
        if why:
            yield doc.diagnostic("FJ313", f"queue {queue!r} becomes the label scheduler.tensorstack.dev/queue, whose value {why}", (*base, "t9kScheduler", "queue"))


RULES = (pod_templates, service_ports, queues)
