"""Apply overlays to job documents: patches, then namespace, labels, annotations, images.

Pure: documents and read overlays in, documents and diagnostics out.  Every diagnostic points
at an overlay file's line (FJ600 a patch that selects no job, FJ601 a patch that cannot apply);
values an overlay sets keep its line, so later validation errors point there too.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import Diagnostic, Severity, unique
from ..loader import Document
from .fields import add_metadata, set_images, set_namespace
from .file import Overlay, Patch
from .jsonpatch import json_patch
from .located import Node, from_document, plain, to_document
from .merge import strategic_merge
from .target import compile_target

IDENTITY = ("apiVersion", "kind")
IDENTITY_META = ("name", "namespace")


def identify(body: Node) -> tuple[Node, dict[str, str]]:
    """Split a strategic-merge patch into its body and the target its own kind/name imply."""
    fields: dict[str, str] = {}
    values = dict(body.value)
    for key in IDENTITY:
        node = values.pop(key, None)
        if key == "kind" and node is not None and isinstance(node.value, str):
            fields["kind"] = node.value
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


def _selects(patch: Patch, job: dict) -> bool:
    if patch.target is not None:
        return patch.target.matches(job)
    if patch.is_json:
        return True
    _, implied = identify(patch.body)
    return compile_target(implied).matches(job)


def _job_name(root: Node) -> str:
    meta = root.get("metadata")
    name = meta.get("name") if meta is not None else None
    return str(name.value) if name is not None else "?"


def apply_overlay(overlay: Overlay, docs: list[Document]) -> tuple[list[Document], list[Diagnostic]]:
    """One overlay over every job document."""
    problems: list[Diagnostic] = []
    used: set[int] = set()
    out: list[Document] = []
    for doc in docs:
        root = from_document(doc)
        for number, patch in enumerate(overlay.patches):
            if not _selects(patch, plain(root)):
                continue
            used.add(number)
            root, found = _patch_one(root, patch)
            problems.extend(replace(d, message=f"{d.message} (patching job {_job_name(root)})") for d in found)
        root = _whole_job(overlay, root)
        out.append(to_document(root, doc))
    for number, patch in enumerate(overlay.patches):
        if number not in used:
            problems.append(patch.entry.diagnostic(
                "FJ600", "this patch selects no job", severity=Severity.WARNING,
                hint="check its target (or the patch's kind and metadata.name) against the jobs being compiled",
            ))
    return out, unique(problems)


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


