"""Environment overlays: `flatjob compile jobs/ --overlay overlays/prod -o rendered/prod`.

An overlay folder holds `overlay.yaml` (file.py): patches written in T9k terms and merged with
T9k's list keys (replicaSpecs by type, containers/env/volumes/volumeMounts/ports by name; see
listkeys.py), JSON 6902 patches, `images:`, `namespace:`, `labels:` and `annotations:`.
`load_overlays` reads the folders once and returns the pipeline's Overlay step; docs/overlays.md
is the user's guide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import Diagnostic
from ..loader import Document
from .apply import apply_overlay
from .file import Overlay, read_overlay


@dataclass(frozen=True)
class OverlayStack:
    """The pipeline's overlay step: overlays applied in order, after any problems reading them."""

    overlays: tuple[Overlay, ...]
    problems: tuple[Diagnostic, ...] = ()

    def holds(self, doc: Document) -> bool:
        """Whether a document sits in an overlay folder: a patch file that looks like a job."""
        where = Path(doc.path).resolve()
        return any(where.is_relative_to(o.folder.resolve()) for o in self.overlays)

    @property
    def files(self) -> list[tuple[Path, str]]:
        """Every overlay file read (path, text), recorded as compile inputs."""
        return [f for o in self.overlays for f in o.files]

    def __call__(self, docs: list[Document]) -> tuple[list[Document], list[Diagnostic]]:
        problems = list(self.problems)
        if any(p.is_error for p in problems):
            return docs, problems
        docs = [d for d in docs if not self.holds(d)]
        for overlay in self.overlays:
            docs, found = apply_overlay(overlay, docs)
            problems.extend(found)
        return docs, problems


def load_overlays(folders: Iterable[str | Path]) -> OverlayStack:
    """Read overlay folders (in the order given; later ones apply on top)."""
    overlays, problems = [], []
    for folder in folders:
        overlay, found = read_overlay(Path(folder))
        overlays.append(overlay)
        problems.extend(found)
    return OverlayStack(tuple(overlays), tuple(problems))


__all__ = ["Overlay", "OverlayStack", "apply_overlay", "load_overlays", "read_overlay"]
