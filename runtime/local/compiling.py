"""Compile one job for run-local with the real pipeline, and refuse what cannot run here.

The pipeline is the one `flatjob compile` runs (load, overlays, validate, normalize, plan,
render, emit) with one option on, CompileOptions.local_addresses, so every pod's address is
its own loopback IP.  The emitted files are parsed back: what the local API server gets
(record, PodTemplates, PodGroup) is what git would hold.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from flatjob.compiler import keys
from flatjob.compiler.loader import Document
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import CompiledJob, compile_documents, load
from flatjob.compiler.plan import JobPlan

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
    lock: Any = None  # SSH kinds: the lock on the run's block of loopback addresses, held until exit

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
    """--replicas-scale TYPE=N items as {type: n}."""
    out: dict[str, int] = {}
    for item in items:
        rtype, eq, count = item.partition("=")
        if not eq or not rtype or not count.isdigit():
            raise LocalError(f"--replicas-scale {item!r}: expected TYPE=N, e.g. worker=1")
        out[rtype] = int(count)
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


def replicas_overlay(replicas: Mapping[str, int], then: Callable[[list[Document]], Any]) -> Callable[[list[Document]], Any]:
    """The pipeline's overlay step, followed by the --replicas-scale changes."""

    def step(docs: list[Document]) -> Any:
        docs, problems = then(docs)
        if replicas:
            docs = [replace(d, data=with_replicas(d.data, replicas)) if isinstance(d.data, dict) else d for d in docs]
        return docs, problems

    return step


def _overlay(folders: tuple[str, ...]) -> Callable[[list[Document]], Any]:
    if not folders:
        from flatjob.compiler.pipeline import no_overlay

        return no_overlay
    from flatjob.compiler.overlay import load_overlays

    return load_overlays(folders)


def _pick(jobs: list[CompiledJob], name: str | None, path: str) -> CompiledJob:
    names = [j.name for j in jobs]
    if name is not None:
        found = [j for j in jobs if j.name == name]
        if not found:
            raise LocalError(f"{path}: no job named {name!r} (jobs: {', '.join(names)})")
        return found[0]
    if len(jobs) != 1:
        raise LocalError(f"{path} holds {len(jobs)} jobs ({', '.join(names)}); choose one with --job NAME")
    return jobs[0]


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def compile_local(path: str, overlays: tuple[str, ...] = (), replicas: Mapping[str, int] | None = None, job: str | None = None) -> LocalJob:
    """Compile the job in `path` for this machine; raise LocalError when it cannot run here."""
    compiled = _compile(path, overlays, replicas, job, block=1)
    lock = None
    if compiled.kind in SSH_KINDS and compiled.plan.pods:  # sshd needs port 22 on every address
        block, lock = claim_block(len(compiled.plan.pods))
        if block != 1:
            compiled = _compile(path, overlays, replicas, job, block=block)
    plan = compiled.plan
    if plan.run_mode == "pause":
        raise Unsupported(f"{compiled.kind} {compiled.name} is paused (spec.runMode.pause.enabled): its runtime would run no pod; unpause it to run it here")
    objects = tuple(d for f in APPLIED if f in compiled.files for d in _documents(compiled.files[f]))
    record = objects[0]
    templates = tuple(o for o in objects if o.get("kind") == "PodTemplate")
    if not templates:
        raise Unsupported(f"{compiled.kind} {compiled.name} has no pods to run")
    return LocalJob(plan, record, templates, objects, dict(plan.files), lock)


def _compile(path: str, overlays: tuple[str, ...], replicas: Mapping[str, int] | None, job: str | None, block: int) -> CompiledJob:
    from flatjob.compiler.report import format_text

    options = CompileOptions(local_addresses=True, local_block=block)
    result = compile_documents(load([path]), options, replicas_overlay(replicas or {}, _overlay(overlays)))
    if result.failed:
        raise CompileFailed(format_text(result.diagnostics).rstrip("\n"))
    return _pick(result.jobs, job, path)
