"""Lint job specs: load, validate, collect every finding. Reads files; writes nothing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .budget import planned
from .errors import Diagnostic
from .heap import no_cyclic_gc
from .loader import load_paths
from .validate import Validated, validate_document
from .validate.across import check_across


@dataclass
class LintResult:
    """Everything lint found, plus counts for the summary line."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    validated: list[Validated] = field(default_factory=list)
    files: int = 0

    @property
    def jobs(self) -> int:
        return len(self.validated)

    @property
    def failed(self) -> bool:
        return any(d.is_error for d in self.diagnostics)


@no_cyclic_gc()
def lint_paths(paths: Iterable[str], namespace: str | None = None, allow_empty: bool = False) -> LintResult:
    """Check every T9k job under `paths` (files or folders); `namespace` is where jobs that set
    none will land (compile's -n), for the checks across jobs; `allow_empty` passes a folder
    that holds no job (a repository whose last job was removed), as compile's --allow-empty."""
    loaded = load_paths(paths)
    result = LintResult(diagnostics=list(loaded.diagnostics) + ([] if allow_empty else loaded.no_job_folders), files=len(loaded.files))
    for doc in loaded.jobs:
        v = validate_document(doc)
        result.validated.append(v)
        result.diagnostics.extend(v.diagnostics)
    across = check_across(((v.doc, v.job) for v in result.validated if v.job is not None), namespace)
    result.diagnostics.extend(across)
    if not any(d.is_error for d in across):  # as compile: the render budget, on every valid job (plans dropped)
        from .options import CompileOptions
        from .pipeline import in_output_order

        for p in planned(in_output_order(v for v in result.validated if v.ok), CompileOptions(namespace=namespace)):
            result.diagnostics.extend(p.problems)
    return result
