"""The TensorBoard pod flatjob renders, checked like the job's own pod templates.

tensorboardSpec becomes a Deployment (render/tensorboard.py) whose pod template the API
server validates as it does any other (ValidatePodTemplateSpec), so a claimName, an image or
resources it refuses there failed the sync (review 21, round 5, #4).  Lint renders that very
pod spec and runs the pod-spec checks over it; each finding is placed at the line of
tensorboardSpec the value came from (ROUTES), never at a second list of rules.
Log paths are checked once, over every PVC location whichever field named it (#6): a `..`
leaves the read-only mount, a `,` splits tensorboard's --logdir_spec into more runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic
from ..loader import Document, PathT
from ..render.tensorboard import SPEC_PATH, log_sources, pod_spec
from .apivalues import spec_numbers
from .podshape import spec_shapes
from .podspec import spec_values

# A rendered field's prefix -> the tensorboardSpec field it is copied from (the rest of the path kept).
ROUTES: dict[PathT, PathT] = {
    ("containers", 0, "image"): ("image",),
    ("containers", 0, "resources"): ("resources",),
    ("schedulerName",): ("scheduler",),
}
SPEC_CHECKS = (spec_values, spec_shapes, spec_numbers)


@dataclass(frozen=True)
class Traced:
    """A Document whose findings about a rendered object land where each value was written."""

    doc: Document
    source: Callable[[PathT], PathT]

    def diagnostic(self, code: str, message: str, path: PathT = (), *, key: bool = False, **kw: Any) -> Diagnostic:
        return self.doc.diagnostic(code, message, self.source(path), key=key, **kw)


def _router(spec: Any) -> Callable[[PathT], PathT]:
    """Map a path in the rendered pod spec to the tensorboardSpec field that wrote it."""
    named: dict[str, PathT] = {}
    for pvc, _, at, _ in log_sources(spec):
        named.setdefault(pvc, at)
    claims = list(named.values())  # volume logs-<i> mounts the i-th PVC, where it is first named

    def source(path: PathT) -> PathT:
        if path[:1] == ("volumes",) and len(path) > 1 and isinstance(path[1], int) and path[1] < len(claims):
            return claims[path[1]]
        for n in (3, 1):
            if path[:n] in ROUTES:
                return (*SPEC_PATH, *ROUTES[path[:n]], *path[n:])
        return SPEC_PATH

    return source


def tensorboard_pod(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """The rendered TensorBoard pod spec through the pod-spec checks, and its log paths."""
    spec = getattr(job.spec, "tensorboard_spec", None)
    pod = pod_spec(spec) if spec is not None else None
    if pod is None:
        return
    traced = Traced(doc, _router(spec))
    for check in SPEC_CHECKS:
        yield from check(traced, pod, ())  # type: ignore[arg-type]
    for _, sub, _, at in log_sources(spec):
        if ".." in sub.split("/"):
            yield doc.diagnostic("FJ204", f"log path {sub!r} leaves the PVC's mount ('..')", at)
        elif "," in sub:
            yield doc.diagnostic("FJ204", f"log path {sub!r} holds ',', which splits tensorboard's --logdir_spec into more runs", at)


RULES = (tensorboard_pod,)
