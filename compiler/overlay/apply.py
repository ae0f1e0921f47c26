"""Apply overlays to job documents: patches, then namespace, labels, annotations, images.

Pure: documents and read overlays in, documents and diagnostics out.  Every diagnostic points
at an overlay file's line (FJ600 a patch that selects no job, FJ601 a patch that cannot apply);
values an overlay sets keep its line, so later validation errors point there too.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..errors import Diagnostic, Severity, unique
from ..limits import DEFAULT
from ..loader import Document
from .fields import add_metadata, set_images, set_namespace, template_count
from .file import Overlay, Patch
from .jsonpatch import json_patch
from .located import Node, from_document, plain, size, to_document
from .merge import strategic_merge
from .target import Target, compile_target

IDENTITY = ("apiVersion", "kind")
CHECK_COST = 10  # values charged for asking whether a patch selects a job (~5 us): 100 000 checks at most
# Values charged for each value a patch adds to a job (~1.3 us and ~130 bytes each, kept until the
# job is rendered): 250 000 at most, so a run's patching stays within ~0.4 s and ~35 MiB.
ADD_COST = 4
IDENTITY_META = ("name", "namespace")


def identify(body: Node) -> tuple[Node, dict[str, str]]:
    """Split a strategic-merge patch into its body and the target its own kind/name imply."""
    fields: dict[str, str] = {}
    values = dict(body.value)
    for key in IDENTITY:
        node = values.pop(key, None)
        if key == "kind" and node is not None and isinstance(node.value, str):
            fields["kind"] = _literal(node.value)
    meta = values.get("metadata")
    if meta is not None and isinstance(meta.value, dict):
        inner = dict(meta.value)
        for key in IDENTITY_META:
            node = inner.pop(key, None)
            if node is not None and isinstance(node.value, str):
                fields[key] = _literal(node.value)
        if inner:
            values["metadata"] = replace(meta, value=inner)
        else:
            values.pop("metadata")
    return replace(body, value=values), fields


def _literal(text: str) -> str:
    """A name as a whole-match regular expression that matches only itself."""
    return re.escape(text)


def _patch_one(root: Node, patch: Patch) -> tuple[Node, list[Diagnostic]]:
    if patch.is_json:
        return json_patch(root, patch.body)
    body, _ = identify(patch.body)
    merged, problems = strategic_merge(root, body)
    return (merged if merged is not None else root), problems


def _selects(patch: Patch, job: dict, implied: dict[int, Target]) -> bool:
    if patch.target is not None:
        return patch.target.matches(job)
    if patch.is_json:
        return True
    return implied[id(patch)].matches(job)


def _implied(patches: tuple[Patch, ...]) -> dict[int, Target]:
    """The target a strategic-merge patch without one implies (its own kind and name), once per patch."""
    return {id(p): compile_target(identify(p.body)[1]) for p in patches if p.target is None and not p.is_json}


def _job_name(root: Node) -> str:
    meta = root.get("metadata")
    name = meta.get("name") if meta is not None else None
    return str(name.value) if name is not None else "?"


class _Identity:
    """What a target reads of a job (apiVersion, kind, metadata) as plain data, made again only
    when a patch changed one of them: 10 000 patches over 500 jobs must not copy each job 10 000
    times (they took 110 s)."""

    def __init__(self) -> None:
        self.root: Node | None = None
        self.nodes: tuple[Node | None, ...] = ()
        self.data: dict[str, Any] = {}

    def of(self, root: Node) -> tuple[dict[str, Any], int]:
        """The job's identity, and how many values were copied to make it (0: unchanged)."""
        if root is self.root:
            return self.data, 0
        self.root = root
        nodes = (root.get("apiVersion"), root.get("kind"), root.get("metadata"))
        if len(nodes) == len(self.nodes) and all(a is b for a, b in zip(nodes, self.nodes, strict=True)):
            return self.data, 0
        self.nodes = nodes
        self.data = {k: plain(n) for k, n in zip(("apiVersion", "kind", "metadata"), nodes, strict=True) if n is not None}
        return self.data, sum(size(n, DEFAULT.file_nodes) for n in nodes if n is not None)


class _Work:
    """The overlay's cost in values, against the reading limits: a patched job holds at most
    limits.file_nodes values, like a job read from a file, and all the patching of a run (each
    application's patch, each job it copied) costs at most limits.run_patch_values.  A JSON patch's
    `copy` can double a job per operation, so a job is counted, up to its limit, after every
    patch that copies; other patches add at most their own size."""

    def __init__(self) -> None:
        self.left = DEFAULT.run_patch_values

    def spend(self, n: int, patch: Patch) -> Diagnostic | None:
        self.left -= n
        if self.left >= 0:
            return None
        return patch.entry.diagnostic(
            "FJ105",
            f"applying this overlay's patches to the jobs they select costs more than {DEFAULT.run_patch_values:,} YAML values in all "
            f"(each value a patch adds to a job counts {ADD_COST} times, each check of a target {CHECK_COST})",
            hint="patch fewer jobs, or make the patches smaller",
        )


def _grown(root: Node, patch: Patch, before: int) -> tuple[int, Diagnostic | None]:
    """The job's size after a patch (before + the patch's size, an upper bound; counted when that
    bound is past the limit, or when the patch copies) and FJ105 when it holds too much."""
    copies = patch.is_json and any(isinstance(op.value, dict) and getattr(op.get("op"), "value", None) in ("copy", "move") for op in patch.body.value)
    after = before + patch.size
    if copies or after > DEFAULT.file_nodes:
        after = size(root, DEFAULT.file_nodes)
    if after <= DEFAULT.file_nodes:
        return after, None
    return after, patch.entry.diagnostic("FJ105", f"patching job {_job_name(root)} makes it hold more than {DEFAULT.file_nodes:,} YAML values, the most flatjob reads from one file", hint="a JSON patch's copy duplicates what it copies: copy less")


def _checks_alone(overlay: Overlay, docs: list[Document]) -> Diagnostic | None:
    """FJ105 at the first patch when asking each patch of each job already costs more than the
    run may spend: the loop below would stop anyway, after matching up to 100 000 targets."""
    patches = overlay.patches
    if len(patches) * len(docs) * CHECK_COST <= DEFAULT.run_patch_values:
        return None
    return patches[0].entry.diagnostic(
        "FJ105",
        f"applying this overlay's {len(patches):,} patches to {len(docs):,} jobs costs more than {DEFAULT.run_patch_values:,} YAML values in all "
        f"({CHECK_COST} for each time a patch's target is checked against a job)",
        hint="patch fewer jobs, or use fewer patches with wider targets",
    )


def apply_overlay(overlay: Overlay, docs: list[Document]) -> tuple[list[Document], list[Diagnostic]]:
    """One overlay over every job document (stopped at FJ105 when patching costs too much)."""
    floor = _checks_alone(overlay, docs)
    if floor is not None:
        return docs, [floor]
    problems: list[Diagnostic] = []
    used: set[int] = set()
    out: list[Document] = []
    work, implied = _Work(), _implied(overlay.patches)
    for doc in docs:
        root = from_document(doc)
        count, identity = len(doc.value_marks), _Identity()
        for number, patch in enumerate(overlay.patches):
            job, copied = identity.of(root)
            stop = work.spend(copied + CHECK_COST, patch)
            if stop is None and not _selects(patch, job, implied):
                continue
            used.add(number)
            if stop is None:
                root, found = _patch_one(root, patch)
                problems.extend(replace(d, message=f"{d.message} (patching job {_job_name(root)})") for d in found)
                count, stop = _grown(root, patch, count)
                stop = stop or work.spend(patch.size * ADD_COST, patch)
            if stop is not None:
                return docs, unique([*problems, stop])
        stop = _metadata_cost(overlay, root, count, work)
        if stop is not None:
            return docs, unique([*problems, stop])
        root = _whole_job(overlay, root)
        out.append(to_document(root, doc))
    for number, patch in enumerate(overlay.patches):
        if number not in used:
            problems.append(patch.entry.diagnostic(
                "FJ600", "this patch selects no job", severity=Severity.WARNING,
                hint="check its target (or the patch's kind and metadata.name) against the jobs being compiled",
            ))
    return out, unique(problems)


def _metadata_cost(overlay: Overlay, root: Node, count: int, work: _Work) -> Diagnostic | None:
    """FJ105 at the overlay's labels (or annotations) when copying them onto the job and each
    of its pod templates would make the job hold more than a file may, or the run's patching
    cost more than it may (12 000 labels over 100 templates took 12.6 s and 728 MiB)."""
    given = [(name, node) for name, node in (("labels", overlay.labels), ("annotations", overlay.annotations)) if node is not None]
    if not given:
        return None
    each = sum(_values(node) for _, node in given)
    copies = 1 + template_count(root)
    cost = each * copies
    work.left -= cost * ADD_COST  # as a patch's values are charged (review of round 13: 1 each let 20 jobs write 39 MB)
    if count + cost <= DEFAULT.file_nodes and work.left >= 0:
        return None
    name, node = max(given, key=lambda g: _values(g[1]))
    return node.diagnostic(
        "FJ105",
        f"this overlay's labels and annotations ({each:,} YAML values) are copied onto job {_job_name(root)} and each of its "
        f"{copies - 1:,} pod templates: {cost:,} values, more than the {DEFAULT.file_nodes:,} a job may hold"
        + ("" if work.left >= 0 else f" or the {DEFAULT.run_patch_values:,} the run's patching may cost"),
        key=True, hint=f"set fewer {name} here, or set them in the jobs that need them",
    )


def _values(labels: Node) -> int:
    """A labels or annotations map's YAML values, its keys counted as the file reader counts them."""
    return size(labels, DEFAULT.file_nodes + 1) + (len(labels.value) if isinstance(labels.value, dict) else 0)


def _whole_job(overlay: Overlay, root: Node) -> Node:
    if overlay.namespace is not None:
        root = set_namespace(root, overlay.namespace)
    if overlay.labels is not None:
        root = add_metadata(root, "labels", overlay.labels)
    if overlay.annotations is not None:
        root = add_metadata(root, "annotations", overlay.annotations)
    if overlay.images:
        root = set_images(root, list(overlay.images))
    return root


