"""The result type of Kubernetes schema validation, and its diagnostic codes."""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_FIELD = "FJ400"
WRONG_TYPE = "FJ401"
BAD_ENUM = "FJ402"
MISSING_REQUIRED = "FJ403"
BAD_FORMAT = "FJ404"
DUPLICATE_KEY = "FJ405"


@dataclass(frozen=True)
class Violation:
    """One way a manifest breaks the Kubernetes schema, located by its path in the object."""

    path: tuple[str | int, ...]
    code: str
    message: str
    key: bool = False
    hint: str | None = None
    warning: bool = False  # valid for the pinned version, refused by older API servers
