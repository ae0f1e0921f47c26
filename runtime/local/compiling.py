"""Compile one job for run-local with the real pipeline, and refuse what cannot run here.

The pipeline is the one `flatjob compile` runs (load, overlays, validate, normalize, plan,
render, emit) with one option on, CompileOptions.local_addresses, so every pod's address is
its own loopback IP.  The emitted files are parsed back: what runs is what git would hold.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from flatjob.compiler.loader import Document
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import CompiledJob, compile_documents, load
from flatjob.compiler.plan import JobPlan

from .errors import LocalError, Unsupported
from .ssh import SSH_KINDS, claim_block


class CompileFailed(LocalError):
    """The job does not compile; the message holds the diagnostics, as `flatjob lint` prints them."""


@dataclass(frozen=True)
class LocalJob:
    """One compiled job, as the files git would hold, ready to run here."""

    plan: JobPlan
    record: dict[str, Any]
    pods: tuple[dict[str, Any], ...]  # rendered Pod manifests, in rank order
    files: dict[str, str]  # ConfigMap data (hostfile, scripts), empty for most kinds
    lock: Any = None  # SSH kinds: the lock on the run's block of loopback addresses, held until exit

    @property
    def kind(self) -> str:
        return self.plan.kind

    @property
    def name(self) -> str:
        return self.plan.name

    def address(self, pod: str) -> str:
        """The pod's loopback address."""
        return next(p.address for p in self.plan.pods if p.name == pod)


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
    return [d for d in yaml.safe_load_all(text) if d]


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
        raise Unsupported(f"{compiled.kind} {compiled.name} is paused (spec.runMode.pause): it renders no pods to run")
    record = _documents(compiled.files["job.yaml"])[0]
    pods = tuple(_documents(compiled.files["pods.yaml"])) if "pods.yaml" in compiled.files else ()
    if not pods:
        raise Unsupported(f"{compiled.kind} {compiled.name} has no pods to run")
    return LocalJob(plan, record, pods, dict(plan.files), lock)


def _compile(path: str, overlays: tuple[str, ...], replicas: Mapping[str, int] | None, job: str | None, block: int) -> CompiledJob:
    from flatjob.compiler.report import format_text

    options = CompileOptions(local_addresses=True, local_block=block)
    result = compile_documents(load([path]), options, replicas_overlay(replicas or {}, _overlay(overlays)))
    if result.failed:
        raise CompileFailed(format_text(result.diagnostics).rstrip("\n"))
    return _pick(result.jobs, job, path)
