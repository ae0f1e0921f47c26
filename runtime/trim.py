"""What the runtime keeps of each watched object: only the fields its decisions read.

An API server's pod is 5-8 KB of JSON (defaults, managedFields, status); a job of 5000 pods
must fit the runtime's memory limit, so informers cache trimmed copies, made as each list
page or watch event arrives.  Trimming also normalises shapes a hand edit could break
(a list where a map belongs), so nothing downstream meets a type it does not expect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from flatjob.compiler import keys
from flatjob.compiler.limits import DEFAULT

from . import nesting, sieve
from .model import Ledger
from .observe import STUCK, sidecars, tolerates_unreachable

TEMPLATE_BYTES = DEFAULT.object_bytes  # compile refuses a bigger pod (FJ324); the runtime does not cache one

Obj = dict[str, Any]

_META = ("name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp", "creationTimestamp")
# Pod conditions the decisions read: readiness (and who cleared it: a lost node clears Ready
# alone, a readiness gate gives reason ReadinessGatesNotReady), why the scheduler cannot place
# the pod, and whether it is being disrupted.
_CONDITIONS = {"Ready": ("reason",), "ContainersReady": (), "PodScheduled": ("reason", "message"), "DisruptionTarget": ("reason", "message")}
_MESSAGE_CAP = 1024  # a waiting or scheduling message kept for the record, at most
_REASON_CAP = 128  # a reason is one CamelCase word
_DETAILED = 8  # containers whose messages are kept; the others' states and reasons only
TERMINATION_CAP = 4096  # the kubelet's own cap on a container's termination message (its end is kept)
_TOLERATION = ("key", "operator", "value", "effect", "tolerationSeconds")
_OWNER = ("apiVersion", "kind", "name", "uid", "controller")
# The API server bounds no field of an ownerReference but the object (validateOwnerReference
# only asks that each be non-empty): a pod whose maker wrote a 1 MiB name there was cached
# whole.  A group/version is at most 253 + 1 + 63 characters, a name 253, a uid a UUID; a
# longer value is left out, never cut (a uid cut to the record's length could equal it).
_OWNER_CAP = 320
# A pod's labels and annotations the decisions read; a pod's other metadata is anyone's who may
# create pods (1 000 junk pods with the job's labels and 256 KiB of annotations each would
# otherwise be 250 MiB of cache), so a cached pod is bounded whatever its maker put on it.
_POD_LABELS = (keys.JOB_KIND, keys.JOB_NAME, keys.REPLICA_TYPE, keys.REPLICA_INDEX)
_POD_NOTES = (keys.ATTEMPT, keys.RESTART_COUNT, keys.RESUMING, keys.SPEC_HASH, keys.STOPPED, keys.SSH_SECRET_UID)
_NOTE_CAP = 256  # the runtime's own values are numbers, "true", a digest and a uid
CONTAINERS_CAP = 64  # container statuses, scheduling gates and conditions read per pod: a pod flatjob renders has fewer


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in _dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def meta(obj: Obj, *, labels: bool = True, annotations: bool = True) -> Obj:
    """metadata without managedFields, finalizers and the like."""
    m = _dict(obj.get("metadata"))
    out = {k: m[k] for k in _META if m.get(k) is not None}
    if labels and m.get("labels"):
        out["labels"] = _strings(m["labels"])
    if annotations and m.get("annotations"):
        out["annotations"] = _strings(m["annotations"])
    # What ownership checks read, never more: the controller reference (the API server allows
    # one an object; anyone may write any number of others).
    controller = next((r for r in map(_dict, _list(m.get("ownerReferences"))) if r.get("controller") is True), None)
    if controller is not None:
        out["ownerReferences"] = [{k: controller[k] for k in _OWNER if k in controller and _owner_field(controller[k])}]
    return out


def _owner_field(value: Any) -> bool:
    """An ownerReference value worth keeping: `controller`'s boolean, or a string of a length
    some object's apiVersion, kind, name or uid can have."""
    return isinstance(value, bool) or (isinstance(value, str) and len(value) <= _OWNER_CAP)


def _pod_meta(obj: Obj) -> Obj:
    """A pod's metadata: only the labels and annotations the runtime reads, values capped."""
    m = _dict(obj.get("metadata"))
    out = meta(obj, labels=False, annotations=False)
    grace = m.get("deletionGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool):  # when a deletion began: its date less this (observe)
        out["deletionGracePeriodSeconds"] = grace
    held = [f[:_NOTE_CAP] for f in _list(m.get("finalizers"))[:CONTAINERS_CAP] if isinstance(f, str)]
    if held:  # what keeps it after its deletion: Kueue's is taken off, any other named (decisions)
        out["finalizers"] = held
    for key, wanted, cap in (("labels", _POD_LABELS, _NOTE_CAP), ("annotations", _POD_NOTES, _NOTE_CAP)):
        given = _dict(m.get(key))
        kept = {k: given[k][:cap] for k in wanted if isinstance(given.get(k), str)}
        if kept:
            out[key] = kept
    return out


def _capped(fields: Any, message_cap: int, tail: bool = False) -> Obj:
    """A state's reason and message (the kubelet's, or a termination message the program wrote),
    capped; `tail` keeps a message's end (torchrun's summary names the root cause last)."""
    caps = {"reason": _REASON_CAP, "message": message_cap}
    return {k: (v[-caps[k]:] if tail and k == "message" else v[:caps[k]]) for k, v in _dict(fields).items() if k in caps and isinstance(v, str) and caps[k]}


def _container_status(status: Any, message_cap: int) -> Obj:
    s = _dict(status)
    state = _dict(s.get("state"))
    kept: Obj = {}
    if "terminated" in state:
        term = _dict(state["terminated"])
        kept["terminated"] = {
            **({"exitCode": term["exitCode"]} if isinstance(term.get("exitCode"), int) else {}),
            **({"startedAt": term["startedAt"][:64]} if isinstance(term.get("startedAt"), str) else {}),  # how long it ran (back-off reset)
            **({"finishedAt": term["finishedAt"][:64]} if isinstance(term.get("finishedAt"), str) else {}),  # before or after a peer's disruption
            **_capped(term, message_cap and TERMINATION_CAP, tail=True),
        }
    elif "running" in state:
        kept["running"] = {}
    elif "waiting" in state:
        kept["waiting"] = _capped(state["waiting"], message_cap)
    return {"name": str(s.get("name", ""))[:_NOTE_CAP], "state": kept}


def _container_statuses(statuses: Any) -> list[Obj]:
    """At most CONTAINERS_CAP statuses, messages only for the first few (a pod's total is bounded)."""
    return [_container_status(s, _MESSAGE_CAP if i < _DETAILED else 0) for i, s in enumerate(_list(statuses)[:CONTAINERS_CAP])]


def _condition(c: Obj) -> Obj:
    out = {"type": c["type"], "status": c.get("status")}
    for key in ("lastTransitionTime", *_CONDITIONS[c["type"]]):
        if isinstance(c.get(key), str):
            out[key] = c[key][:_MESSAGE_CAP]
    return out


def pod(obj: Obj) -> Obj:
    """A pod as the decisions see it: identity, gates, phase, readiness, exit codes."""
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    out: Obj = {"metadata": _pod_meta(obj), "spec": {}, "status": {}}
    gates = [{"name": g["name"][:_NOTE_CAP]} for g in _list(spec.get("schedulingGates"))[:CONTAINERS_CAP] if isinstance(g, dict) and isinstance(g.get("name"), str)]
    if gates:
        out["spec"]["schedulingGates"] = gates
    if isinstance(spec.get("nodeName"), str):
        out["spec"]["nodeName"] = spec["nodeName"]
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool):  # how long before its date a kubelet's eviction began (observe.disruption_began)
        out["spec"]["terminationGracePeriodSeconds"] = grace
    tolerations = [{k: t[k] for k in _TOLERATION if k in t} for t in _list(spec.get("tolerations")) if tolerates_unreachable(t)][:CONTAINERS_CAP]
    if tolerations:  # how long the pod stays on a node that stopped reporting (the record says)
        out["spec"]["tolerations"] = tolerations
    for key in ("phase", "reason", "message", "startTime"):
        if isinstance(status.get(key), str):
            out["status"][key] = status[key][:_MESSAGE_CAP]
    conditions = [_condition(c) for c in _list(status.get("conditions"))[:CONTAINERS_CAP] if isinstance(c, dict) and c.get("type") in _CONDITIONS]
    if conditions:
        out["status"]["conditions"] = conditions
    statuses = _container_statuses(status.get("containerStatuses"))
    if statuses:
        out["status"]["containerStatuses"] = statuses
    inits = _container_statuses(status.get("initContainerStatuses"))
    skip = sidecars(spec)  # a sidecar's kill code is not why the pod failed
    failed_init = [c for c in inits if c["state"].get("terminated", {}).get("exitCode") not in (None, 0) and c.get("name") not in skip]
    stuck_init = [c for c in inits if c["state"].get("waiting", {}).get("reason") in STUCK]
    created = [c for c in inits if "waiting" not in c["state"] and c not in failed_init][:1]  # the pod's containers are being created (observe._creating_since)
    if failed_init or stuck_init or created:  # why a pod failed or waits before its containers start (kubectl's Init:Error, Init:ImagePullBackOff)
        out["status"]["initContainerStatuses"] = failed_init[:1] + stuck_init[:1] + created
    return out


def _exact(body: bytes) -> bytes:
    """A copy of orjson's output in a block of its own size: orjson's buffer, grown as it
    writes, is kept whole (64 KB of JSON held a 2 MiB block), and these bytes stay cached."""
    return bytes(memoryview(body))


def record(obj: Obj) -> Obj:
    """A job record: spec as compact JSON bytes (spec_of parses it when the job's view is made
    again), metadata trimmed, status as compact JSON bytes read once a cycle (status_of), or
    only its size when it is more than a status of this job can be.

    Whoever may write a record may fill its spec (the CRD keeps unknown fields under a pod
    template) or its status with anything the API server stores (1.3 MB of `{"a":0}` is ~31
    MiB of Python objects): kept parsed, a few such records OOM-killed the namespace runtime,
    and at every restart its first list held them all again (reviews 21 r5, runtime r11).
    A dense record's spec and status come unparsed (RECORD_LIFT: runtime.sieve), and are kept
    as the bytes they are; only a status, if any, has its spec parsed, sieved (spec_of), for
    the most this job's status can take."""
    out = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    spec = obj.get("spec")
    if "spec" in obj:
        out["spec"] = _spec_kept(spec) if isinstance(spec, bytes) else _exact(nesting.dumps(_without_unread(spec)))
    out["metadata"] = meta(obj, labels=False)
    status = obj.get("status")
    if isinstance(status, bytes) and status.startswith(b"{"):  # (lifted: an object's text, as the API server wrote it)
        body = status
    elif isinstance(status, dict):
        body = _exact(nesting.dumps(status))
    else:
        return out
    limit = status_bytes(_dict(spec_of(out) if isinstance(spec, bytes) else spec))
    out["status"] = body if len(body) <= limit else len(body)
    return out


RECORD_LIFT = ("spec", "status")  # a dense record's members kept unparsed (runtime.sieve)
# The spec's fields that keep unknown fields in the CRD (anyone who may update the record may
# put anything there) and that the runtime never reads off the record: a replica type's pod
# template (its pods are the PodTemplates'), the launcher's env and resources, the Service's
# ports, the TensorBoard's resources (compile's concerns). tests/runtime/test_decisions_jobview.py
# proves the job's view the same without them, for every golden job.
UNREAD = ("template", "env", "resources", "ports")


def spec_of(rec: Mapping[str, Any]) -> Any:
    """A cached record's spec, parsed (trim.record keeps it as bytes; a record read whole is as
    it is). A dense one is parsed without the fields the runtime never reads off the record
    (UNREAD: each is `{}` or `[]`), so 1.3 MB of junk under a pod template (the CRD keeps
    unknown fields there) is never ~31 MiB of objects, nor the ~47 MiB its typed job took."""
    spec = rec.get("spec")
    if not isinstance(spec, bytes):
        return spec
    if nesting.json_values(spec) <= nesting.DENSE_VALUES:
        return orjson.loads(spec)
    return _sieved(spec)


def _sieved(spec: bytes) -> Any:
    """A spec's text parsed without UNREAD (at the depths they have: spec.worker.template,
    spec.launcher.env, spec.service.ports: 2; spec.replicaSpecs[i].template: 3)."""
    text, unread = sieve.lift(spec, (2, 3), UNREAD)
    return sieve.restore(nesting.loads(text), unread, lambda v: {} if v.startswith(b"{") else [])


def _without_unread(spec: Any) -> Any:
    """A parsed spec without UNREAD where `_sieved` drops them (a shallow copy: the record's
    text was not dense, but a 1 MiB string under a pod template still cost the cache its size,
    every record)."""
    if not isinstance(spec, dict):
        return spec
    out = {}
    for key, value in spec.items():
        if isinstance(value, dict):
            value = _emptied(value)
        if isinstance(value, (dict, list)):
            inner = value.items() if isinstance(value, dict) else enumerate(value)
            value = type(value)(value) if isinstance(value, dict) else list(value)
            for k, v in list(inner):
                if isinstance(v, dict):
                    value[k] = _emptied(v)
        out[key] = value
    return out


def _emptied(obj: Obj) -> Obj:
    return {k: ({} if isinstance(v, dict) else [] if isinstance(v, list) else v) if k in UNREAD else v for k, v in obj.items()}


def _spec_kept(spec: bytes) -> bytes:
    """What the cache keeps of a record's spec that came as its text (runtime.sieve): its text
    without UNREAD, as of one that came parsed, so a record's junk costs the cache nothing
    however many records hold it (20 such records kept 27 MiB of their bytes)."""
    parsed = orjson.loads(spec) if nesting.json_values(spec) <= nesting.DENSE_VALUES else _sieved(spec)
    return _exact(nesting.dumps(_without_unread(parsed)))


def unserved_record(obj: Obj) -> Obj:
    """A record this runtime does not serve (another mode: another team's `--runtime job`
    records, or one nobody compiled): its name and the mode annotation alone, so its spec and
    status cost nothing; a watch event brings it whole again should its mode change."""
    m = meta(obj, labels=False, annotations=False)
    mode = _dict(_dict(obj.get("metadata")).get("annotations")).get(keys.RUNTIME_MODE)
    if isinstance(mode, str):
        m["annotations"] = {keys.RUNTIME_MODE: mode[:_NOTE_CAP]}
    return {**{k: obj[k] for k in ("apiVersion", "kind") if isinstance(obj.get(k), str)}, "metadata": m}


STATUS_BASE = 64 * 1024  # bytes a job's status may take, plus STATUS_PER_POD a pod: the runtime writes a few KiB
STATUS_PER_POD = 256  # (the ledger's name lists, back-off steps and disruption times at their most scattered; tasks list 100 a type)
STATUS_PER_TYPE = 1024  # a replica type's task, its restart count and conditions' words


def _count(value: Any) -> int:
    return min(value, 10_000) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def status_bytes(spec: Obj) -> int:
    """The most a status of this spec's job can take: grows with the pods it asks for (the
    replicas summed, or an elastic job's maxReplicas, as compile counts them)."""
    pods = sum(_count(_dict(group).get("replicas", 1 if group else 0))
               for group in [*_list(spec.get("replicaSpecs")), _dict(spec.get("worker")), _dict(spec.get("launcher"))])
    pods = max(pods, _count(_dict(spec.get("elastic")).get("maxReplicas")))
    return status_limit(pods, len(_list(spec.get("replicaSpecs"))) + 2)  # a task a type (its replicas listed), worker and launcher included


def status_limit(pods: int, types: int) -> int:
    """The most a status of a job of `pods` pods in `types` replica types can take."""
    return STATUS_BASE + STATUS_PER_POD * min(pods, 10_000) + STATUS_PER_TYPE * min(types, 10_000)


def status_read(status: Obj | bytes, limit: int) -> Obj:
    """What a cycle keeps of a status too big to cache, read whole for it (worker._read_status):
    of status.runtime the ledger's own members (Ledger.KEYS), and of the rest each member whose
    compact JSON fits `limit`, the most this job's status can take; whatever else someone wrote
    there is dropped unparsed (a dense record's status comes as its text: runtime.sieve) or as
    soon as it is decoded (the cycle's status write then leaves it out), so no cycle holds more
    than `limit` of it however many jobs' statuses are filled.  A ledger member, or a
    status.runtime that is not a mapping, bigger than `limit` is no ledger of this job's:
    ValueError (the record is refused)."""
    out: Obj = {}
    for key, value in _members(status).items():
        if key != "runtime":
            if _size(value) <= limit:
                out[key] = _value(value)
            continue
        mapping = isinstance(value, dict) or (isinstance(value, bytes) and value.startswith(b"{"))
        members = _members(value).items() if mapping else [("", value)]
        kept: Obj = {}
        for name, member in members:
            if mapping and name not in Ledger.KEYS:
                continue
            size = _size(member)
            if size > limit:
                where = f"status.runtime.{name}" if name else "status.runtime"
                raise ValueError(f"{where} is {size} bytes of JSON, more than a status of this job can take ({limit})")
            kept[name] = _value(member)
        out[key] = kept if mapping else kept[""]
    return out


def _status_members(depth: int, key: bytes) -> bool:
    """What a list page of one record lifts (worker._read_status, with status_read): its spec;
    each member of its status but `runtime`, and each member of that (RECORD_DEPTH: the items'
    own depth in a list page)."""
    return (depth == RECORD_DEPTH and key == b'"spec"') or (depth == RECORD_DEPTH + 1 and key != b'"runtime"') or depth == RECORD_DEPTH + 2


STATUS_LIFT = _status_members
RECORD_DEPTH = 3  # a list page's items are objects at this depth (the page, its items array, each item)


def _members(value: Obj | bytes) -> Obj:
    """An object's members; of an object's text, each object or array member as its own text
    (unparsed), the rest parsed."""
    if not isinstance(value, bytes):
        return value
    text, values = sieve.lift(value, (1,), None)
    found = sieve.restore(nesting.loads(text), values)
    return found if isinstance(found, dict) else {}


def _size(value: Any) -> int:
    return len(value) if isinstance(value, bytes) else len(nesting.dumps(value))


def _value(value: Any) -> Any:
    return nesting.loads(value) if isinstance(value, bytes) else value


def status_of(rec: Obj) -> Obj | None:
    """A cached record's status ({} when it has none); None when it was too big to keep."""
    status = rec.get("status")
    if isinstance(status, bytes):
        return orjson.loads(status)
    if isinstance(status, int):
        return None
    return status if isinstance(status, dict) else {}


def named(obj: Obj) -> Obj:
    """Objects watched for existence and identity (the SSH Secret's uid, controller reference and
    creation time prove it the runtime's; the PodGroup): never their data."""
    return {"metadata": meta(obj, labels=False, annotations=False)}


def podgroup(obj: Obj) -> Obj:
    """A PodGroup, watched for existence and for the job kind it is labelled for (its
    app.kubernetes.io/name: a namesake's of another kind is not the job's, namesakes.py)."""
    out = named(obj)
    label = _dict(_dict(obj.get("metadata")).get("labels")).get(keys.APP_NAME)
    if isinstance(label, str) and len(label) <= _NOTE_CAP:
        out["metadata"]["labels"] = {keys.APP_NAME: label}
    return out


def template(obj: Obj) -> Obj:
    """A PodTemplate: its metadata (labels, the compiler's annotations), its pod's labels and
    annotations, whether its pod is gated and its restartPolicy (the runtime's shape checks,
    job.pod_spec), and its pod spec kept as compact JSON bytes until a pod is created from it
    (a 5000-pod job's templates would otherwise be the runtime's largest cache)."""
    pod = _dict(obj.get("template"))
    pod_meta = _dict(pod.get("metadata"))
    kept = {k: pod_meta[k] for k in ("labels", "annotations") if k in pod_meta}
    spec = _dict(pod.get("spec"))
    gated = any(isinstance(g, dict) and g.get("name") == keys.RELEASE_GATE for g in _list(spec.get("schedulingGates")))
    policy = spec.get("restartPolicy")
    shape = {"metadata": kept, "gated": gated, "restartPolicy": policy[:40] if isinstance(policy, str) else None, "sshSecrets": ssh_secrets(spec)}
    body = _exact(nesting.dumps(spec, orjson.OPT_SORT_KEYS))
    if len(body) > TEMPLATE_BYTES:  # no template of flatjob's is this big: its size is kept, not it
        return {"metadata": meta(obj), "template": {**shape, "spec": None, "oversize": len(body)}}
    return {"metadata": meta(obj), "template": {**shape, "spec": body}}


def ssh_secrets(spec: Obj) -> list[str]:
    """The Secrets a pod spec mounts as its SSH keys (the `flatjob-ssh` volume, a projected one as
    compile renders it or a plain secret volume), sorted: what the pods trust, whatever an
    annotation beside them says (job._ssh_secret)."""
    found: set[str] = set()
    for volume in _list(spec.get("volumes"))[:CONTAINERS_CAP]:
        volume = _dict(volume)
        if volume.get("name") != keys.SSH_VOLUME:
            continue
        sources = [_dict(s).get("secret") for s in _list(_dict(volume.get("projected")).get("sources"))[:CONTAINERS_CAP]]
        names = [_dict(s).get("name") for s in sources] + [_dict(volume.get("secret")).get("secretName")]
        found |= {n[:_OWNER_CAP] for n in names if isinstance(n, str) and n}
    return sorted(found)


def pod_from_template(tpl: Obj, namespace: str, annotations: dict[str, str], owner: Obj) -> Obj:
    """The pod a trimmed PodTemplate holds, verbatim, plus the runtime's annotations and owner.

    Only the template's own metadata and spec are copied: labels and annotations that GitOps
    tools put on the PodTemplate object (Argo CD's tracking, Flux's) never reach a pod.
    """
    body = _dict(tpl.get("template"))
    pod_meta = _dict(body.get("metadata"))
    spec = body.get("spec")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **{k: v for k, v in pod_meta.items() if k not in ("name", "namespace", "ownerReferences", "generateName")},
            "name": tpl["metadata"]["name"],
            "namespace": namespace,
            "annotations": {**_strings(pod_meta.get("annotations")), **annotations},
            "ownerReferences": [owner],
        },
        "spec": orjson.loads(spec) if isinstance(spec, bytes) else _dict(spec),
    }


def deployment(obj: Obj) -> Obj:
    """A Deployment watched for readiness (the TensorBoard): replicas and what is ready."""
    spec, status = _dict(obj.get("spec")), _dict(obj.get("status"))
    kept = {k: status[k] for k in ("observedGeneration", "readyReplicas", "availableReplicas", "replicas") if isinstance(status.get(k), int)}
    return {"metadata": meta(obj, labels=False, annotations=False), "spec": {"replicas": spec.get("replicas", 1)}, "status": kept}


def ready(deployment: Obj | None) -> bool | None:
    """Whether a (trimmed) Deployment runs every replica it wants, as its controller last saw it."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    if status.get("observedGeneration", 0) < (deployment.get("metadata") or {}).get("generation", 0):
        return False
    return status.get("readyReplicas", 0) >= (deployment.get("spec") or {}).get("replicas", 1)
