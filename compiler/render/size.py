"""What a planned job will render, measured before it is rendered: bytes in all, and its largest object.

A job file of 1 MiB can ask for gigabytes of output (a 1 MiB env value times 2 000 replicas:
compile died with a MemoryError at 1.9 GB; 300 replicas wrote 302 MB), and an object the API
server refuses (over its request limit) is no use rendered.  Every object of a job is rendered
once except the per-pod ones: the larger of its first pod (which may do more: DeepSpeed's
worker-0 launches) and its last (the longest name, index and rank) stands for every pod of a
replica type, and so does its per-replica Service (GenericJob spec.service).  That costs a handful of objects however many pods the job
has.  Sizes are JSON's (what the API server gets; orjson measures ~10x faster than the YAML is
written, which is within a few percent of it), exact but for the few digits by which pods of
one type differ (tests/test_render_size.py).  Each object's annotations are measured too, with
what flatjob adds (the record's flatjob.dev/* notes, each pod's spec-hash) and, for a pod, room
for the notes the runtime adds when it creates, releases or stops it (RUNTIME_POD_NOTES): the API server counts
them all against one object's limit.  Lint and compile both check the same figures
(pipeline.planned), before anything is rendered.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import orjson

from .. import keys
from ..plan import JobPlan, PodPlan
from ..validate.names import annotations_size
from . import JOB_FILES
from .pod import _JobShared, render_pod_template
from .service import render_service


@dataclass(frozen=True)
class Measured:
    """One kind of object a job renders, and its size as JSON (what the API server gets)."""

    kind: str
    name: str
    json_bytes: int
    count: int = 1  # objects of this size (the pods of a replica type)
    type: str | None = None  # the replica type a pod or per-replica Service stands for
    annotation_bytes: int = 0  # its largest annotations as the API server counts them (a pod's with the runtime's)


@dataclass(frozen=True)
class JobSize:
    """What a job renders: every object (per-pod ones once, with their count) and the bytes in all."""

    objects: tuple[Measured, ...]

    @property
    def total(self) -> int:
        """JSON bytes of every object of the job (the YAML compile writes is within a few
        percent of it: tests/test_render_size.py)."""
        return sum(o.json_bytes * o.count for o in self.objects)

    @property
    def largest(self) -> Measured:
        return max(self.objects, key=lambda o: o.json_bytes)


# What the runtime adds to each pod it creates from a PodTemplate, at the longest values it
# writes (runtime/decisions: the attempt and restart counters, JSON integers the ledger reads as int64 at
# most; runtime/worker.py: the stop mark, and the SSH Secret's uid on release): room the
# template's annotations must leave.
RUNTIME_POD_NOTES = {keys.ATTEMPT: str(2**63 - 1), keys.RESTART_COUNT: str(2**63 - 1), keys.RESUMING: "false", keys.STOPPED: "true", keys.SSH_SECRET_UID: "00000000-0000-0000-0000-000000000000"}
RUNTIME_POD_NOTES_BYTES = annotations_size(RUNTIME_POD_NOTES)


def annotation_bytes(obj: dict[str, Any]) -> int:
    """The largest annotations of an object as the API server counts them: its own, and for a
    PodTemplate those of every pod created from it (its template's and the runtime's)."""
    own = annotations_size((obj.get("metadata") or {}).get("annotations") or {})
    if obj.get("kind") != "PodTemplate":
        return own
    pod = ((obj.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    return max(own, annotations_size(pod) + RUNTIME_POD_NOTES_BYTES)  # a template holds none of them (FJ313)


def _measured(obj: dict[str, Any], count: int = 1, type_: str | None = None) -> Measured:
    meta = obj.get("metadata") or {}
    return Measured(str(obj.get("kind")), str(meta.get("name")), len(orjson.dumps(obj)), count, type_, annotation_bytes(obj))


def samples(plan: JobPlan) -> dict[str, tuple[PodPlan, PodPlan, int]]:
    """Replica type -> (its first pod, its last pod, how many pods it has): the first may do
    more than the others (DeepSpeed's worker-0 launches), the last has the longest name, index
    and rank."""
    first: dict[str, PodPlan] = {}
    last: dict[str, PodPlan] = {}
    counts: Counter[str] = Counter()
    for pod in plan.pods:
        counts[pod.type] += 1
        if pod.type not in first or pod.index < first[pod.type].index:
            first[pod.type] = pod
        if pod.type not in last or pod.index > last[pod.type].index:
            last[pod.type] = pod
    return {t: (first[t], p, counts[t]) for t, p in last.items()}


def _larger(a: Measured, b: Measured) -> Measured:
    return a if a.json_bytes >= b.json_bytes else b


def measure(plan: JobPlan) -> JobSize:
    """The job's objects as compile would render them, each replica type's pods by the larger
    of its first and last."""
    per_type = samples(plan)
    shared = _JobShared(plan)
    out: list[Measured] = []
    for filename, renderer in JOB_FILES:
        if filename == "podtemplates.yaml":
            for t, (first, last, n) in per_type.items():
                out.append(_larger(*(_measured(render_pod_template(plan, pod, shared), n, t) for pod in (first, last))))
        elif filename == "service.yaml" and plan.service.per_replica:
            pods = [pod for first, last, _ in per_type.values() for pod in (first, last)]
            sampled = render_service(replace(plan, pods=tuple(pods)))
            out.append(_measured(sampled[0]))
            for i, (t, (_, _, n)) in enumerate(per_type.items()):
                out.append(_larger(_measured(sampled[1 + 2 * i], n, t), _measured(sampled[2 + 2 * i], n, t)))
        else:
            out.extend(_measured(o) for o in renderer(plan))
    return JobSize(tuple(out))
