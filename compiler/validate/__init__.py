"""Validate job documents: the T9k model, cross-field rules and embedded Kubernetes objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import Diagnostic
from ..errors import unique as unique_findings
from ..loader import Document
from .kubecheck import check_embedded
from .numbers import non_finite
from .rules import check_rules
from .typed import validate_model


@dataclass
class Validated:
    """A document's typed job (None when the model rejected it) and every finding, in order."""

    doc: Document
    job: Any
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.job is not None and not any(d.is_error for d in self.diagnostics)


def validate_document(doc: Document) -> Validated:
    """Run every check on one document; findings are sorted by position.

    A NaN or infinity is reported once, as itself (FJ204): other checks' findings at the same
    place (a number where an integer belongs) would only say the same thing again.
    """
    job, found = validate_model(doc)
    kind = doc.data.get("kind") if isinstance(doc.data, dict) else None
    if job is not None:
        kind = job.kind
    embedded = check_embedded(doc, kind) if isinstance(kind, str) else []
    found.extend(embedded)
    if job is not None:
        found.extend(check_rules(job, doc, templates_ok=not any(d.is_error for d in embedded)))
    numbers = non_finite(doc)
    if numbers:
        taken = {(d.path, d.line, d.col) for d in numbers}
        found = [d for d in found if (d.path, d.line, d.col) not in taken] + numbers
    found.sort(key=lambda d: (d.line, d.col, d.code))
    return Validated(doc, job if not any(d.is_error for d in found) else None, unique_findings(found))


__all__ = ["Validated", "validate_document"]
