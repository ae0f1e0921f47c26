"""Fields T9k makes immutable, checked against the record the last compile wrote (FJ322).

T9k's API server refuses a change to `runMode.pause.resumeSpecs` ("cannot be changed", user
manuals, 暂停模式) and to `elastic.minReplicas`/`maxReplicas` ("cannot be changed once the job
is created", API reference).  flatjob has no admission step: a commit is the change.  So
`flatjob compile` and `flatjob diff` compare the new record with the one already in the
output folder (git's copy of what the cluster runs) and warn at the field's line.  Under
flatjob such an edit takes effect (the record and pods follow git), and like every spec edit
it starts a new attempt of a running job: the warning says so.

The record in OUT is read like every other file there (outdir.SafeDir: never through a link;
a link is the compile's FJ702) and parsed within the reading limits: it comes from the same
pull request as the jobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import Diagnostic, Severity
from .limits import DEFAULT
from .loader import parse
from .outdir import LinkFound, NotAFile, SafeDir

RECORD_FILE = "job.yaml"
# (field path in spec, what T9k says): every field T9k documents as immutable.
IMMUTABLE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("runMode", "pause", "resumeSpecs"), "T9k does not allow resumeSpecs to change"),
    (("elastic", "minReplicas"), "T9k does not allow elastic.minReplicas to change once the job exists"),
    (("elastic", "maxReplicas"), "T9k does not allow elastic.maxReplicas to change once the job exists"),
)
WATCHED = ("resumeSpecs", "minReplicas", "maxReplicas")  # a record without them cannot have changed them
CONSEQUENCE = "flatjob applies it, and a running job starts a new attempt; to start afresh, rename the job"


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def changed_fields(previous: dict[str, Any], current: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """(spec path, reason) of each immutable field whose value differs between two records.

    A field absent from the previous record (a job compiled before it was set) is not a change.
    """
    out = []
    for path, why in IMMUTABLE:
        before, after = _at(previous.get("spec"), path), _at(current.get("spec"), path)
        if before is not None and before != after:
            out.append((path, why))
    return out


def _record(text: str | None, path: str) -> dict[str, Any] | None:
    """A record's data, or None when it is missing, broken or past a reading limit."""
    if not text:
        return None
    docs, problems = parse(text, path)
    if problems or len(docs) != 1 or not isinstance(docs[0].data, dict):
        return None
    return docs[0].data


def check_previous(out: SafeDir, root: Path, jobs: Iterable[Any]) -> list[Diagnostic]:
    """FJ322 warnings for compiled jobs whose immutable fields differ from OUT/<folder>/job.yaml."""
    found: list[Diagnostic] = []
    for job in jobs:
        rel = f"{job.folder}/{RECORD_FILE}"
        try:
            raw = out.read(rel, DEFAULT.file_bytes)
            before = raw.decode("utf-8") if raw is not None and len(raw) <= DEFAULT.file_bytes else None
        except (LinkFound, NotAFile, UnicodeDecodeError):
            continue  # a link is refused by the compile itself (FJ702)
        after = job.files.get(RECORD_FILE)
        if before is None or before == after or not any(word in before for word in WATCHED):
            continue  # the common case costs one read and one compare, no YAML parse
        previous, current = _record(before, str(root / rel)), _record(after, RECORD_FILE)
        if previous is None or current is None:
            continue
        changes = changed_fields(previous, current)
        if changes:
            found.extend(_located(job, changes, root / rel))
    return found


def _located(job: Any, changes: list[tuple[tuple[str, ...], str]], previous: Path) -> list[Diagnostic]:
    """The diagnostics at the field's line in the job's source (re-read only when a field changed)."""
    try:
        docs, _ = parse(Path(job.source).read_text(encoding="utf-8"), job.source)
    except (OSError, UnicodeDecodeError):
        docs = []
    doc = next((d for d in docs if _at(d.data, ("metadata", "name")) == job.name), None)
    out = []
    for path, why in changes:
        message = f"spec.{'.'.join(path)} differs from the record in {previous}: {why}; {CONSEQUENCE}"
        if doc is not None:
            out.append(doc.diagnostic("FJ322", message, _deepest(doc.data, ("spec", *path)), severity=Severity.WARNING))
        else:
            out.append(Diagnostic("FJ322", message, path=job.source, severity=Severity.WARNING))
    return out


def _deepest(data: Any, path: tuple[str, ...]) -> tuple[str, ...]:
    """The longest prefix of `path` present in the source (a removed field points at its parent)."""
    for n in range(len(path), 0, -1):
        if _at(data, path[:n]) is not None:
            return path[:n]
    return ()
