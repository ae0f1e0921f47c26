"""The compile pipeline, one visible sequence of pure steps (DESIGN §2):

    load -> overlay -> validate -> normalize -> plan -> (measure: the render budget) -> render -> emit

Only `load` reads files and only compiler.output writes them; every step in between is a
pure function of its input, so the same specs give byte-identical output anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from . import keys
from .budget import planned
from .emit import dump_all
from .errors import Diagnostic
from .heap import no_cyclic_gc
from .loader import Document, Loaded, load_paths
from .normalize import normalize
from .options import CompileOptions
from .output import META_FILE
from .plan import JobPlan, plan
from .render import render_job
from .render.kustomization import KUSTOMIZATION, kustomization
from .render.runtime import RuntimeNeeds, render_namespace_runtime
from .validate import Validated, validate_document
from .validate.across import check_across, runtime_namespaces
from .version import __version__

Overlay = Callable[[list[Document]], tuple[list[Document], list[Diagnostic]]]


@dataclass
class CompiledJob:
    """One job's output folder: relative file name -> file text."""

    name: str
    kind: str
    folder: str
    source: str
    files: dict[str, str]
    job: Any  # the canonical typed job
    options: CompileOptions
    needs: RuntimeNeeds | None = None  # namespace mode: what its namespace's runtime needs of it

    @cached_property
    def plan(self) -> JobPlan:
        """The job's plan, made again when asked for (planning is pure, so it is the same plan).

        Keeping every job's plan until the compile ends held ~90 MB at 50 000 pods and cost
        ~0.2 s in page faults; only run-local, the KRM function and tests look at it.
        """
        return plan(self.job, self.options)


@dataclass
class CompileResult:
    """Compiled jobs, or the diagnostics that stopped the compile."""

    jobs: list[CompiledJob] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    inputs: list[tuple[Path, str]] = field(default_factory=list)  # (path, sha256) of every input file
    options: CompileOptions = field(default_factory=CompileOptions)

    @property
    def failed(self) -> bool:
        return any(d.is_error for d in self.diagnostics)

    def tree(self, root: Path | None = None) -> dict[str, str]:
        """Every output file, relative to the output folder, including kustomizations and metadata.

        With `root` (the output folder), the metadata names inputs relative to it, so the same
        repository gives the same bytes whatever folder flatjob is run from.
        """
        files: dict[str, str] = {}
        for job in self.jobs:
            for rel, text in job.files.items():
                files[f"{job.folder}/{rel}"] = text
        runtimes = namespace_runtimes(self.jobs)
        files.update(runtime_files(runtimes))
        by_folder = {j.folder: j for j in self.jobs}
        for folder, entries in sorted(_levels(by_folder).items()):  # every runtime's folder holds jobs: a level
            rel = f"{folder}/{KUSTOMIZATION}" if folder else KUSTOMIZATION
            # A job named like a namespace (job `research` beside `research/<job>`) shares its
            # folder with that namespace's jobs: its kustomization then lists both.
            own = by_folder.get(folder)
            resources = [f for f in own.files if f != KUSTOMIZATION] if own is not None else []
            if folder in runtimes:
                resources.append(RUNTIME_FILE)
            files[rel] = emit_files({KUSTOMIZATION: [kustomization(resources + sorted(entries))]})[KUSTOMIZATION]
        files[META_FILE] = metadata(self, sorted(files), root)
        return files


RUNTIME_FILE = "runtime.yaml"


def namespace_runtimes(jobs: Iterable[CompiledJob]) -> dict[str, list[dict[str, Any]]]:
    """Folder -> the namespace runtime rendered there, for the jobs compiled in namespace mode:
    one per namespace, whatever the number of jobs, byte-identical for the same jobs.  It goes
    in the namespace's own folder (`<namespace>/`, where the jobs that set it live), else at
    the root (jobs that set none, in the namespace of `-n` or of whoever applies them)."""
    jobs = list(jobs)
    needs: dict[str | None, list[RuntimeNeeds]] = {}
    for job in jobs:
        if job.needs is not None:
            needs.setdefault(job.needs.namespace, []).append(job.needs)
    folders = {runtime_folder(j, jobs) for j in jobs if j.needs is not None}
    out = {}
    for namespace, served in sorted(needs.items(), key=lambda kv: kv[0] or ""):
        out[namespace if namespace in folders else ""] = render_namespace_runtime(namespace, served)
    return out


def runtime_files(runtimes: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Path -> the text of each namespace runtime's file (`namespace_runtimes`' folders)."""
    return {f"{folder}/{RUNTIME_FILE}" if folder else RUNTIME_FILE: emit_files({RUNTIME_FILE: docs})[RUNTIME_FILE] for folder, docs in runtimes.items()}


def runtime_folder(job: CompiledJob, jobs: Iterable[CompiledJob] | None = None) -> str:
    """The folder of the runtime that serves `job` in namespace mode: its namespace's own
    folder when jobs set that namespace (`<namespace>/`), else the root."""
    namespace = job.needs.namespace if job.needs is not None else None
    explicit = {j.folder.split("/", 1)[0] for j in (jobs if jobs is not None else [job]) if "/" in j.folder}
    return namespace if namespace is not None and namespace in explicit else ""


def _levels(folders: Iterable[str]) -> dict[str, set[str]]:
    """Parent folder -> child entries, for a kustomization.yaml at every level above the jobs."""
    levels: dict[str, set[str]] = {"": set()}
    for folder in folders:
        parts = folder.split("/")
        for depth in range(len(parts) - 1):
            levels.setdefault("/".join(parts[:depth]), set()).add(parts[depth])
            levels.setdefault("/".join(parts[: depth + 1]), set())
        levels.setdefault("/".join(parts[:-1]), set()).add(parts[-1])
    return levels


# --- the steps ---------------------------------------------------------------------------


def load(paths: Iterable[str]) -> Loaded:
    """Read every job document under the paths (the only step that reads files)."""
    return load_paths(paths)


def no_overlay(docs: list[Document]) -> tuple[list[Document], list[Diagnostic]]:
    """The identity overlay, used when no --overlay is given."""
    return docs, []


def emit_files(rendered: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Serialize each output file: the generated-file header, then its documents."""
    return {name: keys.GENERATED_HEADER + dump_all(docs) for name, docs in rendered.items()}


def compile_job(v: Validated, options: CompileOptions) -> CompiledJob:
    """normalize -> plan -> render -> emit for one validated job (no budget: tests and tools)."""
    canonical = normalize(v.job)
    return render_planned(v.doc, canonical, plan(canonical, options), options)


def render_planned(doc: Document, canonical: Any, job_plan: Any, options: CompileOptions) -> CompiledJob:
    """render -> emit for one planned job."""
    rendered = render_job(job_plan)
    files = emit_files(rendered)
    files[KUSTOMIZATION] = emit_files({KUSTOMIZATION: [kustomization(list(rendered))]})[KUSTOMIZATION]
    needs = RuntimeNeeds.of(job_plan) if options.runtime == keys.RUNTIME_MODE_NAMESPACE else None
    return CompiledJob(canonical.metadata.name, canonical.kind, job_folder(canonical), doc.path, files, canonical, options, needs)


def in_output_order(validated: Iterable[Validated]) -> list[tuple[Document, Any]]:
    """(document, typed job) of the valid jobs, in the order compile renders them (by folder)."""
    return [(v.doc, v.job) for v in sorted((v for v in validated if v.job is not None), key=lambda v: job_folder(v.job))]


def job_folder(job: Any) -> str:
    """<job>, or <namespace>/<job> for a job that sets its namespace (names are per namespace)."""
    ns = job.metadata.namespace
    return f"{ns}/{job.metadata.name}" if ns else job.metadata.name


@no_cyclic_gc()
def compile_documents(loaded: Loaded, options: CompileOptions, overlay: Overlay = no_overlay) -> CompileResult:
    """Run the pipeline over loaded documents; any error anywhere means no jobs are returned."""
    result = CompileResult(diagnostics=list(loaded.diagnostics), options=options)
    # Only files that hold jobs are inputs: other YAML in a scanned folder (the output folder
    # itself, when it sits inside a source folder) must not make the metadata chase its tail.
    sources = {d.path for d in loaded.jobs}
    result.inputs = [(p, hashlib.sha256(text.encode()).hexdigest()) for p, text in loaded.files if str(p) in sources]
    # Overlay files change the output too (compiler/overlay: OverlayStack.files).
    result.inputs += [(p, hashlib.sha256(text.encode()).hexdigest()) for p, text in getattr(overlay, "files", ())]
    docs, problems = overlay(loaded.jobs)
    result.diagnostics.extend(problems)
    if any(p.code == "FJ105" and p.is_error for p in problems):
        # The overlay hit a limit of the work it may cost: the run stops there, as reading does,
        # instead of validating every job without it (2 000 pod specs took 0.5 s to refuse).
        return result
    validated = [validate_document(d) for d in docs]
    for v in validated:
        result.diagnostics.extend(v.diagnostics)
    # Across the valid jobs even when others failed: the same findings as lint, all at once.
    valid = [(v.doc, v.job) for v in validated if v.job is not None]
    result.diagnostics.extend(check_across(valid, options.namespace))
    result.diagnostics.extend(runtime_namespaces(valid, options.namespace, options.runtime))
    if result.failed:
        return result
    jobs = []
    read = sum(len(text.encode()) for _, text in getattr(overlay, "files", ()))  # an overlay's patches render in every pod they select
    for p in planned(in_output_order(validated), options, also_read=read):  # the render budget, before rendering
        result.diagnostics.extend(p.problems)
        if p.plan is not None and not result.failed:
            jobs.append(render_planned(p.doc, p.job, p.plan, options))
    result.jobs = [] if result.failed else jobs
    return result


def compile_paths(paths: Iterable[str], options: CompileOptions | None = None, overlay: Overlay = no_overlay) -> CompileResult:
    """Load and compile every job under `paths`."""
    return compile_documents(load(paths), options or CompileOptions(), overlay)


# --- metadata ----------------------------------------------------------------------------


def _display(path: Path, root: Path | None) -> str:
    """A stable way to name an input: relative to the output folder (else the working
    directory), so the metadata does not change with the folder flatjob is run from."""
    base = (root if root is not None else Path.cwd()).resolve()
    try:
        return Path(os.path.relpath(path.resolve(), base)).as_posix()
    except ValueError:  # another drive on Windows
        return path.as_posix()


def metadata(result: CompileResult, files: list[str], root: Path | None = None) -> str:
    """The one file that records the flatjob version, the inputs and what was written."""
    inputs = sorted((_display(p, root), h) for p, h in result.inputs)
    digest = hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in inputs).encode()).hexdigest()
    doc = {
        "generator": f"flatjob {__version__}",
        "inputsDigest": f"sha256:{digest}",
        "inputs": [{"path": p, "sha256": h} for p, h in inputs],
        "jobs": [{"name": j.name, "kind": j.kind, "folder": j.folder, "source": _display(Path(j.source), root)} for j in result.jobs],
        "options": json.loads(result.options.recorded() or "{}"),
        "files": [f for f in files if f != META_FILE],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
