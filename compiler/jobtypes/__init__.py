"""The job objects the compile path passes around: plain, frozen, and free of pydantic.

`parse(kind, data)` builds one when the strict check can vouch for the document, else None
(compiler/validate/typed.py then asks pydantic, which explains what is wrong).
"""

from __future__ import annotations

from typing import Any

from . import generated
from .base import Reject, Typed, from_model
from .generated import *  # noqa: F403  # the job classes, by the pydantic models' names
from .generated import KINDS

CLASSES: dict[str, type[Typed]] = {name: getattr(generated, name) for name in generated.__all__ if name != "KINDS"}


def parse(kind: str, data: Any) -> Typed | None:
    """The job object for a document of this kind, or None when only pydantic can tell."""
    try:
        return KINDS[kind].parse(data)
    except Reject:
        return None


def plain(model: Any) -> Any:
    """The job object for a pydantic-validated model."""
    return from_model(model, CLASSES)


__all__ = ["CLASSES", "KINDS", "Reject", "Typed", "parse", "plain", *generated.__all__]
