"""The typed job of trusted data (a job record): the plain strict twins, pydantic when unsure.

Kept apart from compiler/validate, whose rules import the planner: the runtime reads its
record with this and nothing else of the compile path (tests/test_layering.py).
"""

from __future__ import annotations

from typing import Any

from . import jobtypes


def strict_job(kind: str, data: dict[str, Any]) -> jobtypes.Typed:
    """The typed job for trusted data (a record); raises pydantic's ValidationError if invalid."""
    job = jobtypes.parse(kind, data)
    if job is not None:
        return job
    from .models import MODELS

    return jobtypes.plain(MODELS[kind].model_validate(data))
