"""What one runtime process serves: one job (per-job mode) or every job of its namespace.

The compiler writes the mode into each record (`flatjob.dev/runtime`: `job` or `namespace`;
absent means `job`, as records compiled before the namespace runtime existed), and a runtime
acts only on the records of its own mode.  A commit that moves a job from one mode to the
other changes that annotation together with the runtime objects: the old runtime stops
acting on the job the moment it sees the new record, the new one starts from the ledger in
the record's status, and the pods (owned by the record, not by a runtime) run on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flatjob.compiler import keys

NAMESPACE_RUNTIME = keys.NAMESPACE_RUNTIME  # the namespace runtime's objects and its Lease
JobKey = tuple[str, str]  # (kind, name) of a job record


@dataclass(frozen=True)
class Scope:
    """A namespace, and the one job in it (per-job mode) or none (namespace mode)."""

    namespace: str
    kind: str | None = None
    name: str | None = None

    @property
    def per_job(self) -> bool:
        return self.name is not None

    @property
    def mode(self) -> str:
        return keys.RUNTIME_MODE_JOB if self.per_job else keys.RUNTIME_MODE_NAMESPACE

    @property
    def lease(self) -> str:
        return f"{self.name}-runtime" if self.per_job else NAMESPACE_RUNTIME

    @property
    def kinds(self) -> tuple[str, ...]:
        return (self.kind,) if self.kind is not None else tuple(sorted(keys.RECORD_PLURALS))

    def job_labels(self) -> dict[str, str | None]:
        """The label selector of the job's pods and PodTemplates (None: the label exists)."""
        return {keys.JOB_NAME: self.name}

    def record_fields(self) -> dict[str, str] | None:
        return {"metadata.name": self.name} if self.name is not None else None

    def serves(self, record: Mapping[str, Any]) -> bool:
        """Whether this runtime acts on the record (its mode is this runtime's)."""
        notes = (record.get("metadata") or {}).get("annotations") or {}
        return (notes.get(keys.RUNTIME_MODE) or keys.RUNTIME_MODE_JOB) == self.mode


def job_key(obj: Mapping[str, Any]) -> JobKey | None:
    """The job a pod or PodTemplate belongs to, by its labels."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    kind, name = labels.get(keys.JOB_KIND), labels.get(keys.JOB_NAME)
    return (kind, name) if isinstance(kind, str) and isinstance(name, str) else None
