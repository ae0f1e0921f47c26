"""Numbers no manifest can hold: YAML's `.nan`, `.inf` and `-.inf` anywhere in a job.

YAML has them, JSON does not: the API server, kubectl and every GitOps tool speak JSON, so a
job holding one can be neither rendered nor applied (before issue 21, lint said "0 errors"
and compile ended in an internal error).  The whole document is walked once, so a number in
a resource, an emptyDir sizeLimit, a T9k field or a value an overlay patched in is found
wherever it is, at its own line.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import Diagnostic
from ..loader import Document, PathT

_WRITTEN = {math.inf: ".inf", -math.inf: "-.inf"}


def non_finite(doc: Document) -> list[Diagnostic]:
    """FJ204 at every NaN or infinity in the document."""
    out: list[Diagnostic] = []
    stack: list[tuple[PathT, Any]] = [((), doc.data)]
    while stack:
        path, value = stack.pop()
        kind = type(value)
        if kind is float and not math.isfinite(value):
            shown = _WRITTEN.get(value, ".nan")
            out.append(doc.diagnostic("FJ204", f"{shown} is not a number a manifest can hold (JSON has no NaN or infinity)", path, hint="write a finite number, or a quantity such as '500m' or '2Gi'"))
        elif kind is dict:
            stack.extend(((*path, k), v) for k, v in value.items())
        elif kind is list:
            stack.extend(((*path, i), v) for i, v in enumerate(value))
    return out
