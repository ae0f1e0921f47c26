"""`flatjob krm`: a KRM function (kustomize exec plugin, kpt) that renders T9k jobs in a ResourceList.

Input on stdin: a `config.kubernetes.io/v1` ResourceList.  Every T9k job item is replaced, in
place, by the manifests `flatjob compile` would write for it; other items pass through
untouched (comments and `internal.config.kubernetes.io/*` annotations included).  A T9k job
given as the functionConfig is rendered too (the kustomize generator form).  Problems go
into `results[]` with the job's resourceRef, the field path and the item's file, and any
error makes the exit status 1 with the input items returned unchanged (without comments past
PLAIN_WRITE_BYTES).

Options come from a ConfigMap functionConfig's `data` (or any functionConfig's `spec`):
namespace, clusterDomain, scheduler, kueueQueue, runtimeImage.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, get_args

from . import emit
from .errors import Diagnostic
from .heap import no_cyclic_gc
from .loader import Document, Loaded, PathT, Source, foreign_group_job, is_job_candidate, parse
from .options import SchedulerTarget

API_VERSIONS = ("config.kubernetes.io/v1", "config.kubernetes.io/v1beta1")
PATH = "internal.config.kubernetes.io/path"
INDEX = "internal.config.kubernetes.io/index"
LEGACY_PATH = "config.kubernetes.io/path"
LEGACY_INDEX = "config.kubernetes.io/index"
FUNCTION_PREFIXES = ("config.kubernetes.io/", "internal.config.kubernetes.io/", "config.k8s.io/")

# functionConfig key -> (CompileOptions field, parse)
OPTIONS: dict[str, tuple[str, Any]] = {
    "namespace": ("namespace", str),
    "clusterDomain": ("cluster_domain", str),
    "scheduler": ("scheduler", str),
    "kueueQueue": ("kueue_queue", str),
    "runtimeImage": ("runtime_image", str),
    "runtime": ("runtime", str),
}
# Accepted and ignored: pods left git (PodTemplates need no Flux annotation); old configs keep working.
RETIRED_OPTIONS = ("fluxAnnotations",)


@dataclass
class Item:
    """A job item: where it sits in the list and which file it came from."""

    index: int
    data: dict[str, Any]
    file: str | None
    file_index: int | None


@dataclass(frozen=True)
class Kept:
    """An input item passed through as it was (written back from the input, comments and all)."""

    index: int


@dataclass
class Outcome:
    """What the function returns: items (generated plain data, or Kept input items) and results."""

    items: list[Any] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    readable: bool = True  # the input is a ResourceList whose items can be written back
    api_version: str | None = None  # the input ResourceList's, when it is one flatjob reads

    @property
    def failed(self) -> bool:
        return any(r["severity"] == "error" for r in self.results)


def _annotations(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    ann = meta.get("annotations") if isinstance(meta, dict) else None
    return ann if isinstance(ann, dict) else {}


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # int(inf) is an OverflowError
        return None


def _strip(job: dict[str, Any]) -> dict[str, Any]:
    """The job without kustomize/kpt bookkeeping annotations (they must not reach the record)."""
    if not isinstance(job.get("metadata"), dict):
        return job  # validation reports the metadata
    ann = {k: v for k, v in _annotations(job).items() if not (isinstance(k, str) and k.startswith(FUNCTION_PREFIXES))}
    meta = dict(job["metadata"])
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    return {**job, "metadata": meta}


def _marks_by_item(marks: dict[PathT, Any]) -> dict[PathT, dict[PathT, Any]]:
    """The ResourceList's marks grouped by the item (or functionConfig) they are in, re-rooted:
    one pass over all marks, not one per item (1 500 items took 37 s)."""
    out: dict[PathT, dict[PathT, Any]] = {}
    for p, m in marks.items():
        if p[:1] == ("items",) and len(p) >= 2:
            out.setdefault(p[:2], {})[p[2:]] = m
        elif p[:1] == ("functionConfig",):
            out.setdefault(p[:1], {})[p[1:]] = m
    return out


def _sub_document(rl: Document, values: dict[PathT, Any], keys: dict[PathT, Any], data: dict[str, Any], label: str) -> Document:
    """The job of the ResourceList whose re-rooted marks are given, as its own Document."""
    return Document(Source(label, rl.source.text), 0, data, values, keys)


def result(message: str, severity: str = "error", item: Item | None = None, field_path: str | None = None, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """One results[] entry in the KRM functions spec's shape."""
    out: dict[str, Any] = {"message": message, "severity": severity}
    if item is not None:
        meta = item.data.get("metadata") if isinstance(item.data.get("metadata"), dict) else {}
        ref = {"apiVersion": item.data.get("apiVersion"), "kind": item.data.get("kind"), "name": meta.get("name"), "namespace": meta.get("namespace")}
        out["resourceRef"] = {k: v for k, v in ref.items() if v is not None}
        if item.file is not None:
            out["file"] = {"path": item.file, **({"index": item.file_index} if item.file_index is not None else {})}
    if field_path:
        out["field"] = {"path": field_path}
    if tags:
        out["tags"] = tags
    return out


def options_from(config: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """CompileOptions keywords from the functionConfig, and results for what it got wrong."""
    if not isinstance(config, dict) or is_job_candidate(config):
        return {}, []
    values = config.get("data") if config.get("kind") == "ConfigMap" else config.get("spec")
    if values is None:
        return {}, []
    if not isinstance(values, dict):
        return {}, [result("functionConfig data/spec must be a mapping of options")]
    kw, problems = {}, []
    for key, value in values.items():
        if key in RETIRED_OPTIONS:
            continue
        if key not in OPTIONS:
            problems.append(result(f"unknown functionConfig option {key!r}; options: {', '.join(OPTIONS)}", field_path=f"functionConfig.{key}"))
            continue
        if isinstance(value, (dict, list)) or value is None:
            problems.append(result(f"functionConfig option {key!r} must be a string", field_path=f"functionConfig.{key}"))
            continue
        name, convert = OPTIONS[key]
        kw[name] = convert(value)
    if kw.get("scheduler", "auto") not in get_args(SchedulerTarget):
        problems.append(result(f"scheduler must be one of {', '.join(get_args(SchedulerTarget))}", field_path="functionConfig.scheduler"))
    from .options import CompileOptions

    names = {name: key for key, (name, _) in OPTIONS.items()}
    for name, why in CompileOptions(**{k: v for k, v in kw.items() if k != "scheduler"}).problems().items():
        problems.append(result(f"{names[name]} {kw[name]!r} {why}", field_path=f"functionConfig.{names[name]}"))
    return kw, problems


def _diagnostic_result(d: Diagnostic, item: Item | None, at: bool = False) -> dict[str, Any]:
    """A finding as a result; `at` puts its line:col in the message (a problem of stdin itself)."""
    from .errors import CODES

    text = d.message + (f" ({d.hint})" if d.hint else "")
    if at and d.line:
        text = f"{d.path}:{d.line}:{d.col}: {text}"
    return result(f"{text} [{d.code}]", "error" if d.is_error else "warning", item, d.field, {"code": d.code, "name": CODES[d.code].name})


def _generated(job_file: str | None, folder: str, rendered: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rendered manifests, annotated with the file each would be written to (for kpt sink)."""
    base = posixpath.dirname(job_file) if isinstance(job_file, str) else ""
    if base.startswith("/") or ".." in base.split("/"):
        base = ""  # a path annotation that leaves the package: render beside nothing but the root
    out = []
    for name, docs in rendered.items():
        for index, doc in enumerate(docs):
            meta = doc.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}), PATH: posixpath.join(base, folder, name), INDEX: str(index)}
            out.append(doc)
    return out


def transform(text: str) -> Outcome:
    """Run the function over ResourceList text (pure: text in, items and results out)."""
    from .options import CompileOptions
    from .pipeline import RUNTIME_FILE, compile_documents, namespace_runtimes, runtime_folder
    from .render import render_job

    outcome, rl = _resource_list(text)
    if rl is None:
        return outcome
    inputs = rl.data.get("items") or []
    config = rl.data.get("functionConfig")
    kw, found = options_from(config)
    outcome.results.extend(found)
    items, subdocs = _job_items(rl, inputs, config)
    outcome.results.extend(_foreign_group_jobs(inputs))
    if outcome.failed:
        return outcome
    compiled = compile_documents(Loaded(jobs=subdocs), CompileOptions(**kw))
    by_label = {d.source.path: item for d, item in zip(subdocs, items, strict=True)}
    for d in compiled.diagnostics:
        outcome.results.append(_diagnostic_result(d, by_label.get(d.path)))
    if compiled.failed:
        return outcome
    generated = {by_label[j.source].index: _generated(by_label[j.source].file, j.folder, render_job(j.plan)) for j in compiled.jobs}
    # Each namespace's one runtime goes right after the last of its jobs, beside their files.
    for folder, docs in namespace_runtimes(compiled.jobs).items():
        last = max((j for j in compiled.jobs if runtime_folder(j, compiled.jobs) == folder), key=lambda j: by_label[j.source].index)
        generated[by_label[last.source].index].extend(_generated(by_label[last.source].file, folder, {RUNTIME_FILE: docs}))
    outcome.results.extend(_collisions(inputs, generated))
    if outcome.failed:
        return outcome
    new_items: list[Any] = []
    for index in range(len(inputs)):
        new_items.extend(generated.get(index, [Kept(index)]))
    new_items.extend(generated.get(-1, []))  # a job given as the functionConfig (generator form)
    outcome.items = new_items
    return outcome


def _identity(obj: Any) -> tuple[str, str, str, str] | None:
    """What kustomize and the API server tell objects apart by: group, kind, namespace, name."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not isinstance(obj.get("kind"), str) or not isinstance(obj.get("apiVersion"), str):
        return None
    namespace = meta.get("namespace")
    return obj["apiVersion"].rpartition("/")[0], obj["kind"], namespace if isinstance(namespace, str) else "", name


def _collisions(inputs: list[Any], generated: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """An item passed through that is an object a job renders (a Service or PodTemplate of its
    name): kustomize refuses two resources of one id and the API server keeps one, so the
    output would not apply (hx22: such an item and the job's own went out side by side, exit 0)."""
    made = {key: index for index, docs in generated.items() for doc in docs if (key := _identity(doc)) is not None}
    out = []
    for index, obj in enumerate(inputs):
        key = _identity(obj) if index not in generated else None
        if key is not None and key in made:
            item = _passed_item(index, obj)
            job = "the functionConfig" if made[key] < 0 else f"items[{made[key]}]"
            out.append(result(f"{key[1]} {key[3]!r} is also rendered by the job of {job}: the output would hold two objects of one name [FJ323]", item=item, tags={"code": "FJ323", "name": "name-collision"}))
    return out


def _resource_list(text: str) -> tuple[Outcome, Document | None]:
    """The ResourceList document, checked as the KRM functions spec describes it, or results."""
    docs, problems = parse(text, "<stdin>")
    if problems:
        return Outcome(results=[_diagnostic_result(p, None, at=True) for p in problems], readable=False), None
    if len(docs) != 1 or not isinstance(docs[0].data, dict) or docs[0].data.get("kind") != "ResourceList":
        return Outcome(results=[result("stdin must hold one ResourceList (apiVersion config.kubernetes.io/v1)")], readable=False), None
    rl = docs[0]
    if rl.data.get("apiVersion") not in API_VERSIONS:
        return Outcome(results=[result(f"unsupported ResourceList apiVersion {rl.data.get('apiVersion')!r}; expected {API_VERSIONS[0]}")], readable=False), None
    inputs = rl.data.get("items")
    if inputs is not None and not isinstance(inputs, list):
        return Outcome(results=[result(f"items must be a list of resources, not {_kind_of(inputs)}", field_path="items")], readable=False), None
    outcome = Outcome(items=[Kept(i) for i in range(len(inputs or []))], api_version=rl.data.get("apiVersion"))
    for i, obj in enumerate(inputs or []):
        if not isinstance(obj, dict):
            outcome.results.append(result(f"items[{i}] must be a resource (a mapping), not {_kind_of(obj)}", field_path=f"items[{i}]"))
    config = rl.data.get("functionConfig")
    if config is not None and not isinstance(config, dict):
        outcome.results.append(result(f"functionConfig must be a resource (a mapping), not {_kind_of(config)}", field_path="functionConfig"))
    return outcome, (None if outcome.failed else rl)


def _kind_of(value: Any) -> str:
    return {str: "a string", list: "a list", dict: "a mapping", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _job_items(rl: Document, items: list[Any], config: Any) -> tuple[list[Item], list[Document]]:
    """The T9k job items (and a job functionConfig, index -1) as Items and Documents."""
    found: list[Item] = []
    subdocs: list[Document] = []
    candidates = [(i, ("items", i), obj) for i, obj in enumerate(items) if is_job_candidate(obj)]
    if is_job_candidate(config):
        candidates.append((-1, ("functionConfig",), config))
    values, keys = _marks_by_item(rl.value_marks), _marks_by_item(rl.key_marks)
    for index, path, obj in candidates:
        ann = _annotations(obj)
        file = ann.get(PATH, ann.get(LEGACY_PATH))
        item = Item(index, obj, file if isinstance(file, str) else None, _int(ann.get(INDEX, ann.get(LEGACY_INDEX))))
        found.append(item)
        subdocs.append(_sub_document(rl, values.get(path, {}), keys.get(path, {}), _strip(obj), f"items[{index}]"))
    return found, subdocs


def _passed_item(index: int, obj: dict[str, Any]) -> Item:
    """An item that is passed through, as an Item, for a result about it."""
    ann = _annotations(obj)
    file = ann.get(PATH, ann.get(LEGACY_PATH))
    return Item(index, obj, file if isinstance(file, str) else None, _int(ann.get(INDEX, ann.get(LEGACY_INDEX))))


def _foreign_group_jobs(items: list[Any]) -> list[dict[str, Any]]:
    """FJ102 for an item of a T9k job kind under another API group, as lint and compile say it
    of a file (loader.foreign_group_job): passed through, the job would vanish unsaid."""
    out = []
    for index, obj in enumerate(items):
        found = foreign_group_job(obj)
        if found is not None:
            item = _passed_item(index, obj)
            out.append(_diagnostic_result(Diagnostic("FJ102", found[0], f"items[{index}]", hint=found[1], field="apiVersion"), item))
    return out


# A failing run's items are written back without ruamel's round trip past this size: kpt and
# kustomize discard a failing function's items, and the round trip of one 1 MiB value took
# 0.65 s of CPU (issue 21 bounds a hostile input's run at 1 s). Comments are dropped then.
PLAIN_WRITE_BYTES = 256 * 1024


class _Plain:
    """PyYAML's C loader and dumper behind ruamel's load/dump (no comments, ~100x faster)."""

    def load(self, text: str) -> Any:
        import yaml

        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))

    def dump(self, data: Any, stream: io.StringIO) -> None:
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        yaml.dump(data, stream, Dumper=dumper, sort_keys=False, width=4096, allow_unicode=True, default_flow_style=False)


def _writer(text: str, outcome: Outcome) -> Any:
    """ruamel, or _Plain for a failing run over PLAIN_WRITE_BYTES."""
    if outcome.failed and len(text) > PLAIN_WRITE_BYTES:
        return _Plain()
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.width = 4096
    return yaml


def render_output(text: str, outcome: Outcome) -> str:
    """The output ResourceList: kept items keep their comments (ruamel round trip), but for a
    failing run over PLAIN_WRITE_BYTES; generated items are written by flatjob's own emitter
    (emit.py, as compile writes them) in the place a placeholder held in ruamel's output (ruamel
    took ~8 ms an item: 1 500 jobs took 37 s)."""
    yaml = _writer(text, outcome)
    data = None
    if outcome.readable and any(isinstance(e, Kept) for e in outcome.items):  # checked within the reading limits first
        try:
            data = yaml.load(text)
        except Exception:  # the YAML library refuses what flatjob's reader took (any of its errors)
            data = None
    originals = list(data.get("items") or []) if isinstance(data, dict) else []
    if any(isinstance(e, Kept) and e.index >= len(originals) for e in outcome.items):
        data, outcome = None, Outcome(results=[*outcome.results, result("the input's items could not be written back")])
    token = f"flatjob-item-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}-"  # not in the input
    generated = {f"{token}{i}": e for i, e in enumerate(outcome.items) if not isinstance(e, Kept)}
    items = [originals[e.index] if isinstance(e, Kept) else f"{token}{i}" for i, e in enumerate(outcome.items)]
    api = outcome.api_version if outcome.api_version in API_VERSIONS else API_VERSIONS[0]
    out = {"apiVersion": api, "kind": "ResourceList", "items": items}
    if outcome.results:
        out["results"] = outcome.results
    buffer = io.StringIO()
    yaml.dump(out, buffer)
    return _PLACEHOLDER.sub(lambda m: _item_text(m, generated), buffer.getvalue()) if generated else buffer.getvalue()


_PLACEHOLDER = re.compile(r"^( *)- (flatjob-item-[0-9a-f]{24}-[0-9]+)$", re.MULTILINE)


def _item_text(m: re.Match[str], generated: dict[str, Any]) -> str:
    """A generated item as a block sequence entry at the placeholder's indentation."""
    item = generated.get(m.group(2))
    if item is None:  # a line of an input item that only looks like one
        return m.group(0)
    pad = m.group(1)
    lines = emit.dump(item).removesuffix("\n").split("\n")  # only the document's own end: a |+ block keeps its blank lines
    return "\n".join([f"{pad}- {lines[0]}", *(f"{pad}  {line}" if line else "" for line in lines[1:])])


@no_cyclic_gc()
def run(raw: bytes | str) -> tuple[str, int]:
    """The whole function: output text and exit status (1 when any result is an error).

    `raw` is stdin as read (at most the file size limit + 1 bytes): too long, or not UTF-8,
    is a result like any other problem.
    """
    from .limits import Budget
    from .reading import decode

    text, problem = decode(raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw, "<stdin>", Budget())
    outcome = transform(text) if text is not None else Outcome(results=[_diagnostic_result(problem, None, at=True)], readable=False)  # type: ignore[arg-type]
    return render_output(text or "", outcome), 1 if outcome.failed else 0


__all__ = ["run", "transform"]
