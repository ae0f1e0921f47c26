"""Checks across jobs: two jobs in one file may not share a namespace and name.

Called by lint after every document is validated. Only one file is certain to be compiled
as a whole: files in different folders may go to different clusters (jobs/dev, jobs/prod),
so lint does not compare them; compile reports FJ315 over the inputs it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import Diagnostic
from ..loader import Document


def job_key(job: Any) -> str:
    """`namespace/name`, or `name` when the job sets no namespace (as compile's folders)."""
    ns = job.metadata.namespace
    return f"{ns}/{job.metadata.name}" if ns else job.metadata.name


def duplicate_jobs(jobs: Iterable[tuple[Document, Any]]) -> list[Diagnostic]:
    """FJ315 at the name of every job whose file already has a job of that namespace and name."""
    seen: dict[tuple[str, str], Document] = {}
    out: list[Diagnostic] = []
    for doc, job in jobs:
        key = (doc.path, job_key(job))
        first = seen.setdefault(key, doc)
        if first is not doc:
            where = f" in namespace {job.metadata.namespace!r}" if job.metadata.namespace else ""
            line = first.locate(("metadata", "name")).line
            out.append(
                doc.diagnostic(
                    "FJ315",
                    f"job {job.metadata.name!r}{where} is also defined at line {line}; "
                    "names must be unique per namespace",
                    ("metadata", "name"),
                    hint="rename one of them",
                )
            )
    return out
