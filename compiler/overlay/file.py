"""Read one overlay folder's `overlay.yaml` into an Overlay; mistakes become FJ602 at their line.

    # overlays/prod/overlay.yaml
    apiVersion: flatjob.dev/v1alpha1
    kind: Overlay
    namespace: training-prod
    labels: {env: prod}
    annotations: {team: vision}
    images:
      - {name: pytorch/pytorch, newTag: 2.4.1-cuda12.4-cudnn9-runtime}
    patches:
      - path: bigger-workers.yaml          # a strategic merge patch (or a JSON 6902 list)
      - target: {kind: PyTorchTrainingJob, name: mnist-.*}
        patch: |
          - {op: replace, path: /spec/runPolicy/backoffLimit, value: 5}

This is the only module here that reads files; everything it returns is plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import Diagnostic
from ..limits import DEFAULT, Budget
from ..loader import Document, Mark, Source, parse, read_source
from ..reading import confined
from ..validate.names import dns1123_label
from ..validate.suggest import did_you_mean
from .fields import ImageRule
from .located import Node, from_document, size
from .target import FIELDS as TARGET_FIELDS
from .target import Target, compile_target

FILE_NAMES = ("overlay.yaml", "overlay.yml")
API_VERSION = "flatjob.dev/v1alpha1"
KIND = "Overlay"
ALIASES = {"commonLabels": "labels", "commonAnnotations": "annotations"}
KNOWN = ("apiVersion", "kind", "namespace", "labels", "annotations", "images", "patches", *ALIASES)
PATCH_FIELDS = ("path", "patch", "target")
IMAGE_FIELDS = ("name", "newName", "newTag", "digest")

# kustomization fields people will try, and what to do instead.
NOT_HERE = {
    "resources": "name job folders on the command line instead: flatjob compile jobs/ more-jobs/ --overlay DIR",
    "namePrefix": "a job's name is its identity (pod names, DNS names, the record); rename the job in its spec",
    "nameSuffix": "a job's name is its identity (pod names, DNS names, the record); rename the job in its spec",
    "replicas": "patch the replica spec instead, e.g. patches: [{patch: {spec: {replicaSpecs: [{type: worker, replicas: 4}]}}}]",
    "patchesStrategicMerge": "use patches: (each entry a path: or patch:), as current kustomize does",
    "patchesJson6902": "use patches: with a target: and a patch that is a list of operations",
    "configMapGenerator": "generators are kustomize's job: keep them in a kustomization.yaml next to the rendered output",
    "secretGenerator": "generators are kustomize's job: keep them in a kustomization.yaml next to the rendered output",
}


@dataclass(frozen=True)
class Patch:
    """One patch: a mapping (strategic merge) or a list (JSON 6902), and which jobs it targets."""

    body: Node
    target: Target | None
    entry: Node  # the patches[] item, where "matches no job" is reported
    size: int = 0  # values in the body (what applying it may add to a job, at most)

    @property
    def is_json(self) -> bool:
        return isinstance(self.body.value, list)


@dataclass(frozen=True)
class Overlay:
    """One overlay folder, read and checked."""

    folder: Path
    namespace: Node | None = None
    labels: Node | None = None
    annotations: Node | None = None
    images: tuple[ImageRule, ...] = ()
    patches: tuple[Patch, ...] = ()
    files: tuple[tuple[Path, str], ...] = ()  # every file read, for the compile metadata


@dataclass
class _Reader:
    folder: Path
    problems: list[Diagnostic] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)
    budget: Budget = field(default_factory=Budget)  # one for the folder: a patch file named 10 000 times is read within it

    def bad(self, node: Node, message: str, *, key: bool = False, hint: str | None = None) -> None:
        self.problems.append(node.diagnostic("FJ602", message, key=key, hint=hint))

    def read(self, path: Path, anchor: tuple[Source, Mark] | None = None) -> list[Document] | None:
        """Parse a YAML file of the overlay; problems are recorded, None when unreadable."""
        text, problem = read_source(path, self.budget) if confined(path, self.folder) else (None, Diagnostic("FJ602", "is a symbolic link that leads outside the overlay folder (or into a hidden folder); flatjob does not follow it", str(path)))
        if problem is not None:
            message = f"cannot read {path}: {problem.message}"
            code = "FJ105" if problem.code == "FJ105" else "FJ602"
            if anchor is None:
                self.problems.append(Diagnostic(code, message, str(path)))
            else:
                src, mark = anchor
                self.problems.append(Diagnostic(code, message, src.path, mark.line, mark.col, source_line=src.line(mark.line)))
            return None
        assert text is not None
        self.files.append((path, text))
        docs, problems = parse(text, str(path), self.budget)
        self.problems.extend(problems)
        return None if any(p.is_error for p in problems) else docs


def find_file(folder: Path) -> Path | None:
    """The overlay file of a folder, if it has one."""
    return next((folder / n for n in FILE_NAMES if (folder / n).is_file()), None)


def read_overlay(folder: Path) -> tuple[Overlay, list[Diagnostic]]:
    """Read and check `folder/overlay.yaml`."""
    reader = _Reader(folder)
    if not folder.is_absolute() and not confined(folder, Path()):  # as a job folder's links (reading.py); an absolute path is the caller's
        return Overlay(folder), [Diagnostic(
            "FJ602", f"overlay folder {folder} is a symbolic link that leads outside the working directory (or into a hidden folder); flatjob does not follow it",
            str(folder), hint="commit the overlay itself, or name its real path",
        )]
    path = find_file(folder)
    if path is None:
        hint = "this folder has a kustomization.yaml; flatjob overlays use overlay.yaml (docs/overlays.md)" if (folder / "kustomization.yaml").is_file() else "create overlay.yaml (docs/overlays.md)"
        return Overlay(folder), [Diagnostic("FJ602", f"no {FILE_NAMES[0]} in overlay folder {folder}", str(folder), hint=hint)]
    docs = reader.read(path)
    if docs is None:
        return Overlay(folder, files=tuple(reader.files)), reader.problems
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        where = docs[1] if len(docs) > 1 else (docs[0] if docs else None)
        mark = where.locate(()) if where else Mark(1, 1)
        source = Source(str(path), reader.files[-1][1])
        reader.problems.append(Diagnostic("FJ602", "an overlay file holds one mapping (namespace, labels, annotations, images, patches)", str(path), mark.line, mark.col, source_line=source.line(mark.line)))
        return Overlay(folder, files=tuple(reader.files)), reader.problems
    overlay = _overlay(reader, from_document(_first_patches(docs[0])))
    return overlay, reader.problems


def _first_patches(doc: Document) -> Document:
    """The document with at most MAX_PATCHES + 1 patches: `_patches` refuses more at the next one,
    and locating 5 000 of them first was an eighth of such a run's time."""
    patches = doc.data.get("patches")
    if not isinstance(patches, list) or len(patches) <= MAX_PATCHES + 1:
        return doc
    return replace(doc, data={**doc.data, "patches": patches[:MAX_PATCHES + 1]})


def _overlay(reader: _Reader, root: Node) -> Overlay:
    kw: dict[str, Any] = {}
    for key, node in root.value.items():
        name = ALIASES.get(key, key)
        handler = _FIELDS.get(name)
        if handler is None:
            _unknown(reader, key, node)
            continue
        if name in kw:
            reader.bad(node, f"{key} and {name} set the same thing; keep one", key=True)
            continue
        kw[name] = handler(reader, node)
    return Overlay(reader.folder, files=tuple(reader.files), **{k: v for k, v in kw.items() if k in _RESULT})


def _unknown(reader: _Reader, key: str, node: Node) -> None:
    if key in NOT_HERE:
        reader.bad(node, f"{key} is not supported in a flatjob overlay", key=True, hint=NOT_HERE[key])
        return
    hint = did_you_mean(key, KNOWN) or f"fields: {', '.join(KNOWN[2:7])}"
    reader.bad(node, f"unknown overlay field {key!r}", key=True, hint=hint)


def _api_version(reader: _Reader, node: Node) -> None:
    if node.value != API_VERSION:
        reader.bad(node, f"apiVersion must be {API_VERSION}")


def _kind(reader: _Reader, node: Node) -> None:
    if node.value != KIND:
        reader.bad(node, f"kind must be {KIND}")


def _namespace(reader: _Reader, node: Node) -> Node | None:
    why = dns1123_label(node.value) if isinstance(node.value, str) else "must be a string"
    if why:
        reader.bad(node, f"namespace {node.value!r} {why}", hint="a namespace name, e.g. training-prod")
        return None
    return node


def _string_map(reader: _Reader, node: Node) -> Node | None:
    if not isinstance(node.value, dict):
        reader.bad(node, "expected a mapping of names to string values")
        return None
    ok = True
    for key, value in node.value.items():
        if not isinstance(value.value, str):
            reader.bad(value, f"the value of {key!r} must be a string; quote it (\"{value.value}\")")
            ok = False
    return node if ok else None


def _images(reader: _Reader, node: Node) -> tuple[ImageRule, ...]:
    if not isinstance(node.value, list):
        reader.bad(node, "images is a list of {name, newName, newTag, digest}")
        return ()
    rules = []
    for entry in node.value:
        if not isinstance(entry.value, dict) or not isinstance((entry.get("name") or entry).value, str):
            reader.bad(entry, "an images entry needs name (the image to change, without tag)")
            continue
        for key, value in entry.value.items():
            if key not in IMAGE_FIELDS:
                reader.bad(value, f"unknown images field {key!r}", key=True, hint=did_you_mean(key, IMAGE_FIELDS))
            elif not isinstance(value.value, str):
                reader.bad(value, f"{key} must be a string; quote it")
        if not any(entry.get(k) is not None for k in IMAGE_FIELDS[1:]):
            reader.bad(entry, "an images entry needs newName, newTag or digest")
        values = {k: entry.get(k).value for k in IMAGE_FIELDS if entry.get(k) is not None}
        rules.append(ImageRule(entry, values["name"], values.get("newName"), values.get("newTag"), values.get("digest")))
    return tuple(rules)


MAX_PATCHES = 1_000  # an overlay's patches (real ones hold a handful)


def _patches(reader: _Reader, node: Node) -> tuple[Patch, ...]:
    if not isinstance(node.value, list):
        reader.bad(node, "patches is a list; each entry has path: or patch:, and optionally target:")
        return ()
    if len(node.value) > MAX_PATCHES:  # before any is built: 5 000 took 0.4 s of CPU to check
        extra = node.value[MAX_PATCHES]
        reader.problems.append(extra.diagnostic("FJ105", f"more than {MAX_PATCHES:,} patches in one overlay; flatjob stops reading them here", hint="use fewer patches with wider targets"))
        return ()
    out: list[Patch] = []
    for entry in node.value:
        out.extend(_patch(reader, entry))
    return tuple(out)


def _patch(reader: _Reader, entry: Node) -> list[Patch]:
    if not isinstance(entry.value, dict):
        reader.bad(entry, "a patches entry is a mapping with path: or patch:")
        return []
    for key, value in entry.value.items():
        if key not in PATCH_FIELDS:
            hint = did_you_mean(key, PATCH_FIELDS) or "fields: path, patch, target"
            reader.bad(value, f"unknown patches field {key!r}", key=True, hint=hint)
    path, inline = entry.get("path"), entry.get("patch")
    if (path is None) == (inline is None):
        reader.bad(entry, "a patches entry needs exactly one of path: (a file in the overlay folder) or patch: (inline)")
        return []
    target = _target(reader, entry.get("target")) if entry.get("target") is not None else None
    bodies = _from_file(reader, path) if path is not None else _inline(reader, inline)
    out = []
    for body in bodies:
        if not isinstance(body.value, (dict, list)):
            reader.bad(body, "a patch is a mapping (strategic merge) or a list of operations (JSON 6902)")
            continue
        out.append(Patch(body, target, entry, size(body, DEFAULT.file_nodes)))
    return out


def _target(reader: _Reader, node: Node) -> Target | None:
    if not isinstance(node.value, dict):
        reader.bad(node, f"target is a mapping of {', '.join(TARGET_FIELDS)}")
        return None
    fields = {}
    for key, value in node.value.items():
        if key not in TARGET_FIELDS:
            reader.bad(value, f"unknown target field {key!r}", key=True, hint=did_you_mean(key, TARGET_FIELDS))
        elif not isinstance(value.value, str):
            reader.bad(value, f"target {key} must be a string")
        else:
            fields[key] = value.value
    try:
        return compile_target(fields)
    except ValueError as exc:
        reader.bad(node, str(exc))
        return None


def _from_file(reader: _Reader, path: Node) -> list[Node]:
    if not isinstance(path.value, str) or "\0" in path.value:
        reader.bad(path, "path is a file name relative to the overlay folder")
        return []
    file = reader.folder / path.value
    if not file.resolve().is_relative_to(reader.folder.resolve()) or not confined(file, reader.folder):
        reader.bad(path, f"{path.value} is outside the overlay folder; keep patches inside it")
        return []
    docs = reader.read(file, (path.source, path.mark))
    return [from_document(d) for d in docs or [] if d.data is not None]


def _inline(reader: _Reader, node: Node) -> list[Node]:
    """An inline patch: YAML written directly, or a block string holding YAML (kustomize style)."""
    if not isinstance(node.value, str):
        return [node]
    docs, problems = parse(node.value, node.source.path, reader.budget)
    remap = _block_remap(node)
    for p in problems:
        mark = remap(Mark(p.line or 1, p.col or 1))
        reader.problems.append(Diagnostic(p.code, p.message, node.source.path, mark.line, mark.col, source_line=node.source.line(mark.line)))
    if any(p.is_error for p in problems):
        return []
    return [from_document(d, remap=remap, source=node.source) for d in docs if d.data is not None]


def _block_remap(node: Node) -> Any:
    """Map a line:col inside a `patch: |` block scalar to the overlay file's line:col."""
    src, mark = node.source, node.mark
    first = src.line(mark.line) or ""
    if first[mark.col - 1 : mark.col] not in ("|", ">"):
        return lambda _m: mark  # a quoted or plain string: point at the value itself
    line = mark.line + 1
    text = src.line(line)
    while text is not None and not text.strip():
        line += 1
        text = src.line(line)
    indent = len(text) - len(text.lstrip(" ")) if text is not None else 0
    return lambda m: Mark(mark.line + m.line, indent + m.col)


_FIELDS: dict[str, Any] = {
    "apiVersion": _api_version,
    "kind": _kind,
    "namespace": _namespace,
    "labels": _string_map,
    "annotations": _string_map,
    "images": _images,
    "patches": _patches,
}
_RESULT = ("namespace", "labels", "annotations", "images", "patches")
