"""Pure helpers to read rendered output back and check it independently of the renderers.

- `objects_of(files)`: every manifest in emitted YAML files, kustomizations left out;
- `pods_of(objects)`: the pods the runtime creates from the PodTemplates among them;
- `compiled_objects(text, options)`: one job spec compiled in memory, its manifests;
- `name_problems(obj)`: names, hostnames and labels that the API server would reject;
- `record_validator(kind)`: the job record's own CRD schema as strict JSON Schema;
- `secret_problems(files)`: private key material, which must never be rendered.

Used by tests/test_properties_pytorch.py and tests/test_compile_corpus.py.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema
import yaml

from flatjob.compiler.render.crd import crd

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
CORE_GROUPS = ("v1", "apps/v1", "rbac.authorization.k8s.io/v1")

# A PEM private key block, or a Secret data entry that carries a private key.
PRIVATE_KEY = re.compile(r"PRIVATE KEY|ssh-privatekey:[ \t]*\S|id_(?:rsa|ed25519|ecdsa):[ \t]*\S")


def objects_of(files: dict[str, str]) -> list[dict[str, Any]]:
    """Every manifest in the .yaml files (sorted by path), without Kustomizations."""
    return [
        obj
        for rel, text in sorted(files.items())
        if rel.endswith(".yaml")
        for obj in yaml.load_all(text, LOADER)
        if obj["kind"] != "Kustomization"
    ]


def pod_of(template: dict[str, Any]) -> dict[str, Any]:
    """The pod the runtime creates from a PodTemplate (before its own annotations)."""
    meta = {"name": template["metadata"]["name"], **({"namespace": template["metadata"]["namespace"]} if "namespace" in template["metadata"] else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, **template["template"]["metadata"]}, "spec": template["template"]["spec"]}


def pods_of(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of every PodTemplate among `objects`, in order."""
    return [pod_of(o) for o in objects if o["kind"] == "PodTemplate"]


def compiled_objects(text: str, options: Any = None) -> list[dict[str, Any]]:
    """Compile one job spec (text) in memory and return every manifest it renders."""
    from flatjob.compiler.loader import Loaded, parse
    from flatjob.compiler.options import CompileOptions
    from flatjob.compiler.pipeline import compile_documents, namespace_runtimes

    docs, problems = parse(text, "job.yaml")
    assert not problems, problems
    result = compile_documents(Loaded(jobs=docs), options or CompileOptions())
    assert not result.failed, [d.message for d in result.diagnostics]
    runtimes = [obj for docs in namespace_runtimes(result.jobs).values() for obj in docs]  # namespace mode: the namespace's
    return [obj for job in result.jobs for obj in objects_of(job.files)] + runtimes


def _label_problems(labels: dict[str, Any]) -> list[str]:
    out = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        bad_prefix = bool(prefix) and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix))
        if bad_prefix or len(name) > 63 or not LABEL_NAME.fullmatch(name):
            out.append(f"label key {key!r}")
        if not isinstance(value, str) or (
            value and (len(value) > 63 or not LABEL_NAME.fullmatch(value))
        ):
            out.append(f"label value {key}={value!r}")
    return out


def name_problems(obj: dict[str, Any]) -> list[str]:
    """Names that are not DNS labels of at most 63 characters, and invalid labels."""
    meta = obj["metadata"]
    out = []
    pattern = DNS1035_LABEL if obj["kind"] == "Service" else DNS1123_LABEL
    if len(meta["name"]) > 63 or not pattern.fullmatch(meta["name"]):
        out.append(f"{obj['kind']} name {meta['name']!r}")
    if obj["kind"] == "PodTemplate":
        for field in ("hostname", "subdomain"):
            value = obj["template"]["spec"].get(field)
            if value is not None and (len(value) > 63 or not DNS1123_LABEL.fullmatch(value)):
                out.append(f"{field} {value!r}")
    out += _label_problems(meta.get("labels", {}))
    template = obj.get("template") if obj["kind"] == "PodTemplate" else (obj.get("spec") or {}).get("template")
    if isinstance(template, dict):
        out += _label_problems((template.get("metadata") or {}).get("labels", {}))
    return out


def strict_schema(schema: Any) -> Any:
    """A CRD's structural schema as plain JSON Schema that rejects fields the API would prune."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def record_validator(kind: str) -> jsonschema.Draft202012Validator:
    """Validates a job record against the CRD flatjob generates for its kind."""
    schema = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return jsonschema.Draft202012Validator(strict_schema(schema))


def record_problems(record: dict[str, Any]) -> list[str]:
    """Where a record breaks its CRD schema."""
    errors = sorted(record_validator(record["kind"]).iter_errors(record), key=str)
    return [f"{list(e.absolute_path)}: {e.message}" for e in errors]


def secret_problems(files: dict[str, str]) -> list[str]:
    """Files holding private key material, and Secrets with data (keys live in the cluster)."""
    out = [
        f"{rel}: {m.group(0)!r}"
        for rel, text in sorted(files.items())
        for m in PRIVATE_KEY.finditer(text)
    ]
    for obj in objects_of(files):
        if obj["kind"] == "Secret" and (obj.get("data") or obj.get("stringData")):
            out.append(f"Secret {obj['metadata']['name']} has data")
    return out
