"""Turn a job document into its typed job: the plain strict check, and pydantic when unsure.

A valid spec never loads pydantic (compiler/jobtypes says why); a spec the plain check
cannot vouch for goes to the pydantic model, which either accepts it or explains every
mistake at its line (compiler/validate/schema.py).
"""

from __future__ import annotations

from typing import Any

from .. import jobtypes
from ..errors import Diagnostic
from ..keys import T9K_API_VERSION
from ..loader import T9K_KINDS, Document
from .suggest import did_you_mean

TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean (true or false)",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def describe(value: Any) -> str:
    """Describe a YAML value for a message: "a string ('x')", "an integer (3)", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value:g})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def check_kind(doc: Document) -> tuple[str | None, list[Diagnostic]]:
    """Decide which model to validate with; a near-miss kind is reported and then used."""
    data = doc.data
    problems: list[Diagnostic] = []
    api = data.get("apiVersion")
    if api is None:
        problems.append(doc.diagnostic("FJ203", "missing required field 'apiVersion'", (), key=True, hint=f"add apiVersion: {T9K_API_VERSION}"))
    elif api != T9K_API_VERSION:
        problems.append(
            doc.diagnostic(
                "FJ205", f"apiVersion {api!r} is not supported; flatjob reads {T9K_API_VERSION}", ("apiVersion",),
                hint=did_you_mean(api, [T9K_API_VERSION]) if isinstance(api, str) else None,
            )
        )
    kind = data.get("kind")
    if kind is None:
        problems.append(doc.diagnostic("FJ203", "missing required field 'kind'", (), key=True, hint="one of " + ", ".join(T9K_KINDS)))
        return None, problems
    if not isinstance(kind, str):
        problems.append(doc.diagnostic("FJ202", f"kind: expected a string, got {describe(kind)}", ("kind",)))
        return None, problems
    if kind in jobtypes.KINDS:
        return kind, problems
    hint = did_you_mean(kind, T9K_KINDS)
    problems.append(
        doc.diagnostic("FJ200", f"unknown kind {kind!r}; flatjob handles " + ", ".join(T9K_KINDS), ("kind",), hint=hint)
    )
    guess = hint.split("'")[1] if hint else None
    return guess, problems


def validate_model(doc: Document) -> tuple[jobtypes.Typed | None, list[Diagnostic]]:
    """Validate a document as its kind; return the typed job or located errors."""
    if not isinstance(doc.data, dict):
        return None, [doc.diagnostic("FJ202", f"a job must be a mapping, got {describe(doc.data)}")]
    kind, problems = check_kind(doc)
    if kind is None:
        return None, problems
    data = dict(doc.data)
    data["kind"] = kind
    data["apiVersion"] = T9K_API_VERSION
    # A guessed kind (FJ200) or a bad apiVersion (FJ205) still yields the typed job, so the
    # cross-field rules run and the user sees every mistake in one pass.
    job = jobtypes.parse(kind, data)
    if job is not None:
        return job, problems
    from .schema import validate_with_model  # pydantic, only for what the plain check doubts

    model, problems = validate_with_model(doc, kind, data, problems)
    return (jobtypes.plain(model) if model is not None else None), problems

