"""The render budget: what a run may render, checked before it is rendered, in lint and compile alike.

Reading limits bound what a job file holds; this bounds what it asks for.  A 1 MiB env value
times 2 000 replicas is 2 GB of PodTemplates (compile died with a MemoryError at 1.9 GB), and a
PodTemplate, ConfigMap or record over the API server's object limit is refused when applied.
`planned` takes the valid jobs in output order and, for each:

1. bounds what its pod templates alone render (one template per replica type, with GenericJob's
   variables substituted for its last pod, times its pods) without planning: planning copies
   each GenericJob pod's substituted template, so this is what planning would hold; a run
   whose templates alone are over the budget stops before anything is planned;
2. within the budget, plans it and measures every object it renders (render/size.py: one pod
   per replica type stands for its type);
3. reports an object over limits.object_bytes (FJ324) at the largest value of the template or
   spec that makes it, an object whose annotations with flatjob's own (and, on a pod, room for
   the runtime's) are over the API server's limit (FJ313) at the user's annotations, and the
   job whose output takes the run past its budget (FJ105): limits.run_render_bytes, or less when
   the run read little (render_budget: render_floor_bytes plus render_per_input_byte per byte
   of its job files, so a few KB cannot ask for what takes compile, `--check`, `diff` or the
   Argo CD plugin hundreds of MiB).

Compile renders only jobs that pass, from the plan made here; lint drops the plans.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import Diagnostic
from .jobtypes import GenericJob
from .limits import DEFAULT, MIB, Limits
from .loader import Document, PathT
from .normalize import normalize
from .options import CompileOptions
from .plan import JobPlan, plan
from .plan.generic import context, substituted_template
from .podset import pod_counts
from .render.size import JobSize, Measured, measure
from .validate.groups import groups
from .validate.names import ANNOTATIONS_BYTES


@dataclass
class Planned:
    """A valid job on its way to rendering: canonical, planned and measured (plan None when it may not render)."""

    doc: Document
    job: Any  # the canonical typed job
    plan: JobPlan | None
    size: JobSize | None
    problems: list[Diagnostic]


def planned(jobs: Iterable[tuple[Document, Any]], options: CompileOptions, limits: Limits = DEFAULT, also_read: int = 0) -> Iterator[Planned]:
    """Each (document, typed job), in the order given (output order), with the budget's findings.

    First every job's pod templates are bounded (no planning): a run whose templates alone are
    over the budget stops there, before anything is planned or rendered.  Then one job at a
    time is planned and measured, so compile renders it before the next is planned and holds
    at most the budget's worth of output when the exact total crosses it.  `also_read`: the
    bytes of the overlay files the run read, which add to what its jobs render.
    """
    items = [(doc, normalize(typed)) for doc, typed in jobs]
    budget = render_budget([doc for doc, _ in items], limits, also_read)
    bounds = [templates_bound(doc, job, limits) for doc, job in items]
    total, over = 0, False
    for (doc, _), (problems, bound, where) in zip(items, bounds, strict=True):
        total += bound
        if total > budget.bytes and not over:
            over = True
            problems.append(_over_budget(doc, total, where, budget))
    total = 0
    for (doc, job), (problems, bound, where) in zip(items, bounds, strict=True):
        p = size = None
        if over or problems:
            spent = bound
        else:
            p = plan(job, options)
            size = measure(p)
            problems = oversized(doc, job, size, limits)
            spent = size.total
            where = _where_of(doc, job, max(size.objects, key=lambda o: o.json_bytes * o.count))
        total += spent
        if total > budget.bytes and not over:
            over = True
            problems.append(_over_budget(doc, total, where, budget))
        yield Planned(doc, job, p if not problems else None, size, problems)


@dataclass(frozen=True)
class RenderBudget:
    """What a run may render (JSON bytes), and the bytes of job files it read to ask for it."""

    bytes: int
    read: int
    limits: Limits

    @property
    def by_input(self) -> bool:
        """Whether what the run read, not run_render_bytes, sets the budget."""
        return self.bytes < self.limits.run_render_bytes


def render_budget(docs: Iterable[Document], limits: Limits = DEFAULT, also_read: int = 0) -> RenderBudget:
    """min(run_render_bytes, render_floor_bytes + render_per_input_byte x the bytes of the
    documents' files and `also_read` (overlays)): a few KB may not ask for what takes compile,
    `--check` or the Argo CD plugin hundreds of MiB (limits.py).  A text is counted once
    however many documents it holds (krm's items all share the ResourceList's)."""
    texts = {id(d.source.text): d.source.text for d in docs}
    read = sum(len(t.encode()) for t in texts.values()) + also_read
    return RenderBudget(min(limits.run_render_bytes, limits.render_floor_bytes + limits.render_per_input_byte * read), read, limits)


def _over_budget(doc: Document, total: int, where: PathT, budget: RenderBudget) -> Diagnostic:
    limits = budget.limits
    if budget.by_input:
        why = (f"more than the {budget.bytes / MIB:,.1f} MiB flatjob renders from {budget.read:,} bytes of job files "
               f"({limits.render_floor_bytes // MIB} MiB and {limits.render_per_input_byte:,} bytes per byte read, at most {limits.run_render_bytes // MIB} MiB)")
    else:
        why = f"more than the {limits.run_render_bytes // MIB} MiB flatjob renders in one run"
    return doc.diagnostic(
        "FJ105", f"with this job the run renders {total / MIB:,.1f} MiB of manifests (as JSON), {why}",
        where, hint="make what each pod repeats smaller (a large value: mount it from a ConfigMap of its own), or compile fewer jobs at once",
    )


# What each pod renders beyond its template, at least, by kind: the PodTemplate's own metadata,
# the env, volumes and addresses flatjob adds (the SSH kinds' sshd, keys and hostfile mounts
# too).  The least measured (render/size.py, a one-container template named `j`, 2 to 9 999
# pods, debug and pause modes): PyTorchTrainingJob 1 614, GenericJob 1 649, DeepSpeedJob
# 2 787, ColossalAIJob 2 704 bytes.  A lower bound, so that a run the exact measure would take
# is never refused (tests/test_render_size.py), yet four 280-byte DeepSpeedJobs of 10 000 workers
# stop before any is planned (with 1 536 for every kind they were planned, 3.7 s and 278 MB;
# attacker of issue 21, round 3).
POD_OVERHEAD = {"DeepSpeedJob": 2560, "ColossalAIJob": 2560}
POD_OVERHEAD_LEAST = 1536


def templates_bound(doc: Document, job: Any, limits: Limits) -> tuple[list[Diagnostic], int, PathT]:
    """(FJ324 for a pod template over the object limit by itself, JSON bytes every pod renders
    at least, where the most of them comes from): no planning, one template per replica type."""
    counts = pod_counts(job)
    overhead = POD_OVERHEAD.get(job.kind, POD_OVERHEAD_LEAST)
    ctx = context(job) if isinstance(job, GenericJob) else None
    problems: list[Diagnostic] = []
    total, most, where = 0, -1, ("spec",)
    for g in groups(job):
        if g.template is None:
            continue
        n = counts.get(g.type, 0)
        template = substituted_template(g.template, ctx, g.type, max(n - 1, 0)) if ctx is not None else g.template
        size = len(orjson.dumps(template))
        if size > limits.object_bytes:
            problems.append(_too_big(doc, "the pod template", g.type, size, limits, _largest(doc, g.template_path)))
        total += n * (size + overhead)
        if n * size > most:
            most, where = n * size, _largest(doc, g.template_path)
    return problems, total, where


def oversized(doc: Document, job: Any, size: JobSize, limits: Limits) -> list[Diagnostic]:
    """FJ324 for each object (each replica type's pods count once) over the object limit, FJ313
    for each whose annotations, with flatjob's and the runtime's, are over the API server's."""
    return [
        *(_too_big(doc, f"{o.kind} {o.name!r}", o.type, o.json_bytes, limits, _where_of(doc, job, o))
          for o in size.objects if o.json_bytes > limits.object_bytes),
        *(_annotations_over(doc, job, o) for o in size.objects if o.annotation_bytes > ANNOTATIONS_BYTES),
    ]


def _annotations_over(doc: Document, job: Any, o: Measured) -> Diagnostic:
    """FJ313 at the annotations the user gave the object (a pod's template's, else the job's)."""
    what = f"each pod of type {o.type!r}" if o.kind == "PodTemplate" else f"the {o.kind} {o.name!r}"
    adds = "flatjob and its runtime add" if o.kind == "PodTemplate" else "flatjob adds"
    return doc.diagnostic(
        "FJ313", f"{what} would hold {o.annotation_bytes:,} bytes of annotations, counting those {adds}; the API server takes at most {ANNOTATIONS_BYTES:,} in one object",
        _annotations_of(job, o), key=True, hint="keep large data out of annotations",
    )


def _annotations_of(job: Any, o: Measured) -> PathT:
    """Where the user's annotations of a measured object are: its replica type's template's,
    else the job's (the record); a missing one is reported at its parent (Document.locate)."""
    paths = {g.type: (*g.template_path, "metadata", "annotations") for g in groups(job)}
    return paths.get(o.type, ("metadata", "annotations")) if o.type is not None else ("metadata", "annotations")


def _too_big(doc: Document, what: str, rtype: str | None, size: int, limits: Limits, where: PathT) -> Diagnostic:
    pods = f" (and every pod of type {rtype!r})" if rtype is not None else ""
    return doc.diagnostic(
        "FJ324", f"{what}{pods} would be {size / MIB:,.2f} MiB; the API server takes objects of at most {limits.object_bytes // MIB} MiB", where,
        hint="keep large data out of the job: mount it from a volume or a ConfigMap of its own",
    )


def _where_of(doc: Document, job: Any, o: Measured) -> PathT:
    """The value that makes an object big: the largest in its replica type's template (a pod),
    in spec.service (a per-replica Service), else in the whole document."""
    if o.type is not None and o.kind == "Service":
        return _largest(doc, ("spec", "service"))
    if o.type is not None:
        for g in groups(job):
            if g.type == o.type and g.template is not None:
                return _largest(doc, g.template_path)
    return _largest(doc, ())


def _largest(doc: Document, base: PathT) -> PathT:
    """The path of the longest string under `base` (the base itself when it holds none)."""
    value: Any = doc.data
    for part in base:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return base
    best, where = -1, base
    stack: list[tuple[PathT, Any]] = [(base, value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            if len(v) > best:
                best, where = len(v), path
        elif isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend(((*path, i), x) for i, x in enumerate(v))
    return where
