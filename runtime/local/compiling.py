"""Compile the jobs of a file or folder for run-local with the real pipeline, and refuse what
cannot run here.

The pipeline is the one `flatjob compile` runs (load, overlays, validate, normalize, plan,
render, emit) in its default runtime mode (namespace: one runtime serves every job), with one
option on, CompileOptions.local_addresses, so every pod's address is its own loopback IP, and
each job's pods in a block of their own (CompileOptions.local_block, addresses.place).  The
emitted files are parsed back: what the local API server gets (records, PodTemplates,
PodGroups) is what git would hold.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from flatjob.compiler import keys
from flatjob.compiler.digits import INT32_MAX, bounded
from flatjob.compiler.loader import Document
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import CompiledJob, compile_documents, emit_files, load
from flatjob.compiler.plan import JobPlan, plan
from flatjob.compiler.render import render_job
from flatjob.compiler.validate.suggest import did_you_mean

from .addresses import place
from .errors import LocalError, Unsupported
from .ssh import SSH_KINDS, claim_block


class CompileFailed(LocalError):
    """The job does not compile; the message holds the diagnostics, as `flatjob lint` prints them."""


# What the API server gets from the compiled files (the fake serves these kinds; the Service,
# the ConfigMap and runtime.yaml have nothing to do on one machine, the Secret is the runtime's).
APPLIED = ("job.yaml", "podtemplates.yaml", "podgroup.yaml")


@dataclass(frozen=True)
class LocalJob:
    """One compiled job, as the files git would hold, ready to run here."""

    plan: JobPlan
    record: dict[str, Any]
    templates: tuple[dict[str, Any], ...]  # the PodTemplates, in rank order
    objects: tuple[dict[str, Any], ...]  # what a GitOps tool would apply: record, PodTemplates, PodGroup
    files: dict[str, str]  # ConfigMap data (hostfile, scripts), empty for most kinds
    lock: Any = None  # SSH kinds: the lock on the job's block of loopback addresses, held until exit

    @property
    def kind(self) -> str:
        return self.plan.kind

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def namespace(self) -> str:
        return (self.record.get("metadata") or {}).get("namespace") or "default"

    @property
    def pods(self) -> tuple[dict[str, Any], ...]:
        """Each PodTemplate as the pod the runtime creates from it (before the API server's
        defaults), in rank order: what preflight checks."""
        return tuple(pod_of(t) for t in self.templates)

    def address(self, pod: str) -> str:
        """The pod's loopback address."""
        return next(p.address for p in self.plan.pods if p.name == pod)

    def training(self) -> dict[str, str | None]:
        """Pod name -> its training container (the compiler notes it on each PodTemplate)."""
        return {t["metadata"]["name"]: (t["metadata"].get("annotations") or {}).get(keys.TRAINING_CONTAINER) for t in self.templates}


def pod_of(template: Mapping[str, Any]) -> dict[str, Any]:
    """The pod a PodTemplate describes (its name is the template's)."""
    inner = template.get("template") or {}
    meta = {**(inner.get("metadata") or {}), "name": template["metadata"]["name"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": inner.get("spec") or {}}


def parse_replicas(items: Iterable[str]) -> dict[str, int]:
    """--replicas-scale TYPE=N items as {type: n} (N: ASCII digits, within a replica count's int32)."""
    out: dict[str, int] = {}
    for item in items:
        rtype, eq, text = item.partition("=")
        count = bounded(text, 0, INT32_MAX)
        if not eq or not rtype or count is None:
            raise LocalError(f"--replicas-scale {item[:80]!r}: expected TYPE=N with N from 0 to {INT32_MAX}, e.g. worker=1")
        out[rtype] = count
    return out


def with_replicas(data: Mapping[str, Any], replicas: Mapping[str, int]) -> dict[str, Any]:
    """A copy of a job document with the replica counts of some types replaced."""
    out = copy.deepcopy(dict(data))
    spec = out.get("spec") or {}
    known = {s.get("type"): s for s in spec.get("replicaSpecs") or [] if isinstance(s, dict)}
    for rtype, count in replicas.items():
        if rtype not in known:
            raise LocalError(f"--replicas-scale {rtype}={count}: the job has no replica type {rtype!r} (types: {', '.join(map(str, known)) or 'none'})")
        known[rtype]["replicas"] = count
    return out


def replicas_overlay(replicas: Mapping[str, int], then: Callable[[list[Document]], Any], job: str | None = None) -> Callable[[list[Document]], Any]:
    """The pipeline's overlay step, followed by the --replicas-scale changes: each applies to
    the jobs that have the type (`job`: only that one), and must apply to one at least."""

    def step(docs: list[Document]) -> Any:
        docs, problems = then(docs)
        chosen = [i for i, d in enumerate(docs) if isinstance(d.data, dict) and (job is None or _named(d.data, job))]
        for rtype, count in replicas.items():
            having = [i for i in chosen if rtype in _types(docs[i].data)]
            if chosen and not having:
                names = list(dict.fromkeys(str(t) for i in chosen for t in _types(docs[i].data)))
                who = "the job has no" if len(chosen) == 1 else "no job has a"
                near = did_you_mean(rtype, names)
                raise LocalError(f"--replicas-scale {rtype}={count}: {who} replica type {rtype!r} (types: {', '.join(names) or 'none'})" + (f"; {near}" if near else ""))
            for i in having:
                docs[i] = replace(docs[i], data=with_replicas(docs[i].data, {rtype: count}))
        return docs, problems

    return step


def _types(data: Mapping[str, Any]) -> list[Any]:
    return [s.get("type") for s in (data.get("spec") or {}).get("replicaSpecs") or [] if isinstance(s, dict)]


def _named(data: Mapping[str, Any], job: str) -> bool:
    """Whether a job document is the one `--job` names (NAME, or NAMESPACE/NAME)."""
    meta = data.get("metadata") or {}
    return job in (meta.get("name"), f"{meta.get('namespace')}/{meta.get('name')}")


def _overlay(folders: tuple[str, ...]) -> Callable[[list[Document]], Any]:
    if not folders:
        from flatjob.compiler.pipeline import no_overlay

        return no_overlay
    from flatjob.compiler.overlay import load_overlays

    return load_overlays(folders)


def _pick(jobs: list[CompiledJob], name: str | None, path: str) -> list[CompiledJob]:
    """Every job of the input, or the one `--job` names (NAME, or NAMESPACE/NAME)."""
    if not jobs:
        raise LocalError(f"{path}: no T9k job to run")
    if name is None:
        return jobs
    found = [j for j in jobs if name in (j.name, j.folder)]
    if not found:
        near = did_you_mean(name, [n for j in jobs for n in (j.name, j.folder)])
        raise LocalError(f"{path}: no job named {name!r} (jobs: {', '.join(j.folder for j in jobs)})" + (f"; {near}" if near else ""))
    if len(found) > 1:
        raise LocalError(f"{path}: several jobs are named {name!r} ({', '.join(j.folder for j in found)}); choose one with --job NAMESPACE/NAME")
    return found


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def compile_local(path: str, overlays: tuple[str, ...] = (), replicas: Mapping[str, int] | None = None, job: str | None = None) -> tuple[LocalJob, ...]:
    """Compile the jobs in `path` (a file or a folder; `job`: only that one) for this machine,
    each in a block of loopback addresses of its own; raise LocalError when they cannot run here."""
    compiled = _pick(_compile(path, overlays, replicas, job), job, path)
    namespaces: dict[str, list[str]] = {}
    for c in compiled:
        namespaces.setdefault(c.job.metadata.namespace or "default", []).append(c.name)
    if len(namespaces) > 1:
        held = "; ".join(f"{ns}: {', '.join(names)}" for ns, names in namespaces.items())
        raise Unsupported(
            f"{path} holds jobs of {len(namespaces)} namespaces ({held}): run-local runs one namespace's jobs, "
            "under that namespace's runtime; choose one job with --job NAMESPACE/NAME, or name a file or folder whose jobs share a namespace"
        )
    for c in compiled:
        if c.plan.run_mode == "pause":
            raise Unsupported(f"{c.kind} {c.name} is paused (spec.runMode.pause.enabled): its runtime would run no pod; unpause it to run it here")
        if not c.plan.pods:
            raise Unsupported(f"{c.kind} {c.name} has no pods to run")
    placed = place([(len(c.plan.pods), c.kind in SSH_KINDS) for c in compiled], claim_block)  # sshd needs port 22 on every address
    return tuple(_local(_at_block(c, block), lock) for c, (block, lock) in zip(compiled, placed, strict=True))


def _local(compiled: CompiledJob, lock: Any) -> LocalJob:
    """The job as the files git would hold, parsed back."""
    objects = tuple(d for f in APPLIED if f in compiled.files for d in _documents(compiled.files[f]))
    templates = tuple(o for o in objects if o.get("kind") == "PodTemplate")
    return LocalJob(compiled.plan, objects[0], templates, objects, dict(compiled.plan.files), lock)


def _compile(path: str, overlays: tuple[str, ...], replicas: Mapping[str, int] | None, job: str | None) -> list[CompiledJob]:
    """The real pipeline, in namespace mode (one runtime for every job, as `flatjob compile`
    renders it by default), each pod at its own loopback address (block 1: see _at_block)."""
    from flatjob.compiler.report import format_text

    options = CompileOptions(local_addresses=True, runtime=keys.RUNTIME_MODE_NAMESPACE)
    result = compile_documents(load([path]), options, replicas_overlay(replicas or {}, _overlay(overlays), job))
    if result.failed:
        raise CompileFailed(format_text(result.diagnostics).rstrip("\n"))
    return result.jobs


def _at_block(compiled: CompiledJob, block: int) -> CompiledJob:
    """The job compiled with its pods in block `block` (127.0.<block>.x): planned, rendered and
    emitted again from its canonical spec, as the pipeline's compile_job does."""
    if block == compiled.options.local_block:
        return compiled
    options = replace(compiled.options, local_block=block)
    return replace(compiled, options=options, files=emit_files(render_job(plan(compiled.job, options))))
