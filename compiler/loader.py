"""Read YAML job specs into plain data plus the line:col of every key and value.

Finding and reading files is reading.py's (regular files, links, sizes); building data from
YAML is yamldata.py's (marks, kubectl's scalars, duplicate keys, tags, limits).  This module
ties them together: documents, and which of them are T9k jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import Diagnostic
from .heap import no_cyclic_gc
from .keys import GENERATED_HEADER, RECORD_GROUP, T9K_GROUP
from .limits import Budget
from .reading import YAML_SUFFIXES, find_inputs, read_text
from .source import Mark, Source
from .syntaxhint import explain
from .yamldata import LimitHit, PathT, documents

T9K_KINDS = ("GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob")

NO_JOB = "no T9k job in this file (expected apiVersion batch.tensorstack.dev/v1beta1 and a job kind)"
# A newcomer's first try is often the rendered record beside the source (hx16).
NO_JOB_RENDERED = ("no T9k job in this file: it is flatjob's rendered output (its first line says so); "
                   "lint the job spec it was compiled from")
# A folder named on the command line that yields no job: lint's "0 jobs checked" would pass a
# wrong folder, a folder of Helm values or a Kubeflow PyTorchJob (issue 25).
NO_JOB_FOLDER = ("no T9k job in folder {folder} ({files} YAML file(s) read, none with apiVersion "
                 "batch.tensorstack.dev/v1beta1 and a job kind)")
NO_YAML_FOLDER = "no T9k job in folder {folder}: it holds no *.yaml or *.yml file"
# A folder named through a link flatjob does not follow (FJ106): it was not read, so "it holds no
# *.yaml file" was false (`flatjob lint ../shared/corpus/t9k`, where ../shared is a link).
NOT_READ_FOLDER = ("no T9k job read in folder {folder}: its path leads through a symbolic link out of "
                   "the working directory (or into a hidden folder), which flatjob does not follow")
# A T9k job kind under another API group (a job copied from elsewhere, a Kubeflow apiVersion
# kept): not a job to read, but skipping it would drop the job from lint and compile unsaid.
FOREIGN_GROUP_JOB = "{kind} of apiVersion {api} is not a T9k job, so flatjob would leave it out (T9k's jobs are batch.tensorstack.dev/v1beta1)"
RENDERED_FOLDER_HINT = "this is flatjob's rendered output (its first line says so); lint the job specs it was compiled from"


@dataclass
class Document:
    """One YAML document: its data and where each value (and each mapping key) sits."""

    source: Source
    index: int  # position of the document in its file, 0-based
    data: Any
    value_marks: dict[PathT, Mark]
    key_marks: dict[PathT, Mark]

    @property
    def path(self) -> str:
        return self.source.path

    def locate(self, path: PathT, *, key: bool = False) -> Mark:
        """Find the mark for a field path, falling back to the nearest existing ancestor.

        `key=True` prefers the mapping key (for unknown fields); a path that does not exist
        (a missing field) resolves to its parent's key, where the user would add it.
        """
        path = tuple(path)
        if key and path in self.key_marks:
            return self.key_marks[path]
        if path in self.value_marks and not key:
            return self.value_marks[path]
        if path in self.key_marks:
            return self.key_marks[path]
        if path in self.value_marks:
            return self.value_marks[path]
        while path:
            path = path[:-1]
            if path in self.key_marks:
                return self.key_marks[path]
            if path in self.value_marks:
                return self.value_marks[path]
        return self.value_marks.get((), Mark(1, 1))

    def locate_text(self, path: PathT, needle: str, nth: int = 0) -> Mark:
        """Find the nth occurrence of `needle` in the source from a value's start (for $(...) refs)."""
        start = self.locate(path)
        text = self.source.text
        offset = self.source.offset(start)
        for _ in range(nth + 1):
            found = text.find(needle, offset)
            if found < 0:
                return start
            hit, offset = found, found + len(needle)
        return self.source.mark(hit)

    def diagnostic_at(self, code: str, message: str, mark: Mark, path: PathT = (), **kw: Any) -> Diagnostic:
        """Build a Diagnostic at an explicit mark (used for positions inside a scalar)."""
        return Diagnostic(
            code=code,
            message=message,
            path=self.source.path,
            line=mark.line,
            col=mark.col,
            field=format_path(path) if path else None,
            source_line=self.source.line(mark.line),
            **kw,
        )

    def diagnostic(self, code: str, message: str, path: PathT = (), *, key: bool = False, **kw: Any) -> Diagnostic:
        """Build a Diagnostic pointing at `path` in this document."""
        return self.diagnostic_at(code, message, self.locate(path, key=key), path, **kw)


def format_path(path: Iterable[str | int]) -> str:
    """Render a field path the way kubectl explain and users write it: spec.replicaSpecs[0].type."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def parse(text: str, path: str = "<input>", budget: Budget | None = None) -> tuple[list[Document], list[Diagnostic]]:
    """Parse a YAML stream into documents; syntax errors and limits become diagnostics at their line."""
    docs: list[Document] = []
    problems: list[Diagnostic] = []
    if not text:  # an empty file holds no document; 30 000 of them must not cost a parser each
        return docs, problems
    source = Source(path, text)
    try:
        for index, (data, value_marks, key_marks, found) in enumerate(documents(source, budget or Budget())):
            problems.extend(found)
            docs.append(Document(source, index, data, value_marks, key_marks))
    except LimitHit as hit:
        problems.append(hit.diagnostic)
    except yaml.MarkedYAMLError as exc:
        problems.append(_syntax_error(exc, source))
    except yaml.reader.ReaderError as exc:  # a character YAML forbids: an offset, no mark
        position = exc.position
        if yaml.__with_libyaml__:  # libyaml counts UTF-8 bytes, marks count characters
            position = len(text.encode("utf-8", "surrogatepass")[:position].decode("utf-8", "ignore"))
        line, col = source.mark(position).line, source.mark(position).col
        char = ord(exc.character) if isinstance(exc.character, str) else exc.character
        what = f"unacceptable character #x{char:04x}: {exc.reason}" if isinstance(char, int) else exc.reason
        problems.append(Diagnostic("FJ100", f"YAML syntax error: {what}", path, line, col, source_line=source.line(line)))
    except yaml.YAMLError as exc:
        message = " ".join(str(exc).split())
        problems.append(Diagnostic("FJ100", f"YAML syntax error: {message}", path, 1, 1, source_line=source.line(1)))
    return docs, problems


def _syntax_error(exc: yaml.MarkedYAMLError, source: Source) -> Diagnostic:
    """FJ100 where the mistake is, with what to do about it (compiler/syntaxhint.py)."""
    mark = exc.problem_mark or exc.context_mark
    at = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    opened = (exc.context_mark.line + 1, exc.context_mark.column + 1) if exc.context_mark else None
    what = exc.problem or "invalid YAML"
    line, col, hint = explain(what, exc.context, at, opened, source.line)
    if exc.context:
        what = f"{exc.context}: {what}"
    return Diagnostic("FJ100", f"YAML syntax error: {what}", source.path, line, col, hint=hint, source_line=source.line(line))


def read_source(path: Path, budget: Budget | None = None) -> tuple[str | None, Diagnostic | None]:
    """Read a file as UTF-8 text; failures become a diagnostic, never an exception."""
    return read_text(path, budget or Budget())


def is_job_candidate(data: Any) -> bool:
    """A document flatjob must check: T9k's API group, or a T9k kind with no apiVersion.

    A T9k kind under a misspelt group (batch.tensorstak.dev) is checked too, so the typo is
    reported instead of the job silently vanishing from a folder scan.
    """
    if not isinstance(data, dict):
        return False
    api = data.get("apiVersion")
    kind_is_t9k = isinstance(data.get("kind"), str) and _looks_like_t9k_kind(data["kind"])
    if isinstance(api, str):
        group = api.split("/", 1)[0]
        return group == T9K_GROUP or (kind_is_t9k and _near_group(group))
    return api is None and kind_is_t9k


def foreign_group_job(data: Any) -> tuple[str, str] | None:
    """FJ102's message and hint for a T9k job kind under another API group, else None.

    A document of another kind beside the jobs (a ConfigMap, a Kubeflow PyTorchJob) is kept
    out silently; a T9k kind name is almost surely a job whose apiVersion is wrong. flatjob's
    own records (flatjob.dev, in its rendered output) are not.
    """
    if not isinstance(data, dict) or is_job_candidate(data) or "apiVersion" not in data:
        return None
    kind, api = data.get("kind"), data["apiVersion"]
    if not isinstance(kind, str) or not _looks_like_t9k_kind(kind):
        return None
    if isinstance(api, str) and api.split("/", 1)[0] == RECORD_GROUP:
        return None
    canonical = next(k for k in T9K_KINDS if k.lower() == kind.lower())
    hint = "did you mean apiVersion: batch.tensorstack.dev/v1beta1" + (f", kind: {canonical}?" if canonical != kind else "?")
    shown = api if isinstance(api, str) and api else json.dumps(api, default=str)
    return FOREIGN_GROUP_JOB.format(kind=kind, api=shown), hint


def _foreign_group_jobs(docs: list[Document]) -> list[Diagnostic]:
    """FJ102 at the apiVersion of every document of a file that is a T9k kind of another group."""
    out = []
    for doc in docs:
        found = foreign_group_job(doc.data)
        if found is not None:
            out.append(doc.diagnostic("FJ102", found[0], ("apiVersion",), hint=found[1]))
    return out


def _near_group(group: str) -> bool:
    """Whether an API group is a likely misspelling of T9k's (not flatjob's own records)."""
    import difflib

    return difflib.SequenceMatcher(None, group.lower(), T9K_GROUP).ratio() >= 0.8


def _looks_like_t9k_kind(kind: str) -> bool:
    folded = kind.lower()
    return any(folded == k.lower() for k in T9K_KINDS)


def no_job_hint(doc: Document) -> str:
    """What a document that is not a T9k job is, and the T9k kind it was likely meant as."""
    data = doc.data
    if not isinstance(data, dict) or not ("kind" in data or "apiVersion" in data):
        what = "a Helm values file?" if Path(doc.path).name.startswith("values") else "plain data, not a Kubernetes object"
        return f"this file has no apiVersion or kind ({what}); a job starts with apiVersion: batch.tensorstack.dev/v1beta1"
    kind, api = data.get("kind"), data.get("apiVersion")
    named = f"a {kind}" if isinstance(kind, str) else "an object"
    if isinstance(api, str):
        named += f" of {api}"
    near = _near_kind(kind) if isinstance(kind, str) else None
    if near:
        return f"this file holds {named}; did you mean apiVersion: batch.tensorstack.dev/v1beta1, kind: {near}?"
    return (f"this file holds {named}; flatjob reads GenericJob, PyTorchTrainingJob, DeepSpeedJob and "
            "ColossalAIJob of batch.tensorstack.dev/v1beta1")


def _near_kind(kind: str) -> str | None:
    """The T9k kind a foreign one is likely meant as (Kubeflow's PyTorchJob: PyTorchTrainingJob)."""
    from .validate.suggest import closest

    return closest(kind, T9K_KINDS)


def _hint_for(docs: list[Document]) -> str | None:
    """no_job_hint for a file's first document that holds something (an empty file: none)."""
    first = next((d for d in docs if d.data is not None), None)
    return no_job_hint(first) if first is not None else None


@dataclass
class _Folder:
    """What the walk of one folder named on the command line found, for FJ102 when it holds no job."""

    path: str
    files: int = 0
    jobs: int = 0
    errors: bool = False
    first: Document | None = None  # its first document that holds something and is not a job
    rendered: bool = False  # that document's file is flatjob's output (GENERATED_HEADER)
    skipped: bool = False  # the folder itself is a link not followed (FJ106): nothing was read

    def diagnostic(self) -> Diagnostic | None:
        if self.jobs or self.errors:
            return None
        if self.skipped:
            return Diagnostic("FJ102", NOT_READ_FOLDER.format(folder=self.path), self.path,
                              hint="name its real path on the command line")
        if not self.files:
            return Diagnostic("FJ102", NO_YAML_FOLDER.format(folder=self.path), self.path,
                              hint="job specs are YAML files; check the folder's name")
        message = NO_JOB_FOLDER.format(folder=self.path, files=self.files)
        if self.first is None:
            return Diagnostic("FJ102", message, self.path, hint="its YAML files are empty")
        has_kind = isinstance(self.first.data, dict) and "kind" in self.first.data
        mark = self.first.locate(("kind",)) if has_kind else Mark(1, 1)
        return self.first.diagnostic_at("FJ102", message, mark, hint=RENDERED_FOLDER_HINT if self.rendered else no_job_hint(self.first))


def _mark_skipped(folders: list[_Folder], skipped: Diagnostic) -> None:
    """A named folder whose own path is the link FJ106 skipped was not read at all."""
    for folder in folders:
        folder.skipped = folder.skipped or Path(folder.path) == Path(skipped.path)


def _folder_of(folders: list[_Folder], file: Path) -> _Folder | None:
    """The named folder a walked file was found in."""
    for folder in reversed(folders):
        if file.is_relative_to(folder.path):
            return folder
    return None


@dataclass
class Loaded:
    """The job documents found under some paths, plus what went wrong reading them."""

    jobs: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)  # every file read, with its text if it holds a job
    # A folder named on the command line that holds no job (FJ102): lint reports it; compile has
    # FJ703 for the case that matters to it, and --allow-empty.
    no_job_folders: list[Diagnostic] = field(default_factory=list)


def _run_refused(budget: Budget, file: Path, diagnostics: list[Diagnostic]) -> bool:
    """Whether a limit of the run stops reading before `file`: said once, not once per file left."""
    if budget.spent:  # crossed by what was read before (nodes, bytes, documents), already said
        return True
    budget.files -= 1
    if budget.files >= 0:
        return False
    budget.spent = True
    diagnostics.append(Diagnostic(
        "FJ105", f"more than {budget.limits.run_files:,} files to read in one run; flatjob stops reading here", str(file),
        hint="compile fewer folders at once, or keep only job files under them",
    ))
    return True


@no_cyclic_gc()
def load_paths(paths: Iterable[str], budget: Budget | None = None) -> Loaded:
    """Load every T9k job document under `paths`; other YAML in a scanned folder is skipped."""
    loaded = Loaded()
    budget = budget or Budget()
    paths = list(paths)
    folders = [_Folder(raw) for raw in paths if Path(raw).is_dir()]
    for found in find_inputs(paths):
        if isinstance(found, Diagnostic):
            loaded.diagnostics.append(found)
            _mark_skipped(folders, found)
            continue
        file, explicit = found.path, found.explicit
        if _run_refused(budget, file, loaded.diagnostics):
            break
        folder = None if explicit else _folder_of(folders, file)
        text, problem = read_text(file, budget)
        if problem is not None:
            if explicit or problem.message != "is a directory":
                loaded.diagnostics.append(problem)
                if folder is not None:
                    folder.errors = True
            continue
        assert text is not None
        docs, problems = parse(text, str(file), budget)
        problems += _foreign_group_jobs(docs)
        loaded.diagnostics.extend(problems)
        jobs = [d for d in docs if is_job_candidate(d.data)]
        loaded.jobs.extend(jobs)
        if folder is not None:
            folder.files += 1
            folder.jobs += len(jobs)
            folder.errors = folder.errors or any(p.is_error for p in problems)
            if folder.first is None and not jobs:
                folder.first = next((d for d in docs if d.data is not None), None)
                folder.rendered = text.startswith(GENERATED_HEADER)
        # Only a file that holds jobs is an input of the output (its digest); the text of any
        # other is let go at once: fifteen 4 MiB files of junk must not stay in memory together.
        loaded.files.append((file, text if jobs else ""))
        if explicit and not jobs and not any(p.is_error for p in problems):
            loaded.diagnostics.append(
                Diagnostic(
                    "FJ102",
                    NO_JOB_RENDERED if text.startswith(GENERATED_HEADER) else NO_JOB,
                    str(file),
                    1,
                    1,
                    source_line=Source(str(file), text).line(1),
                    hint=None if text.startswith(GENERATED_HEADER) else _hint_for(docs),
                )
            )
    if budget.spent:  # refused whole at a limit of the run: checking what was read costs as much again
        loaded.jobs = []
    if not any(d.is_error for d in loaded.diagnostics):  # else those are the thing to fix first
        loaded.no_job_folders = [d for d in (f.diagnostic() for f in folders) if d is not None]
    return loaded


__all__ = ["YAML_SUFFIXES", "Document", "Loaded", "Mark", "PathT", "Source", "foreign_group_job", "format_path", "is_job_candidate", "load_paths", "parse", "read_source"]
