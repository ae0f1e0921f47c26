"""CustomResourceDefinitions of the job records (flatjob.dev), generated from the models.

The schemas are structural (Kubernetes requires it) and the spec carries no defaults: the
compiler renders every field explicitly, and a CRD default would show up as GitOps drift.
The one default is the status of a record no runtime has written yet (WAITING_STATUS): the API
server serves it on every read until the runtime writes its own (apiextensions defaulting
applies to objects read from etcd), as Gateway API's CRDs do ("Waiting for controller").  So
kstatus, Flux's healthCheckExprs and Argo CD see a job waiting for its runtime, never a record
without status (where a CEL expression has no `status` to read).  Embedded
Kubernetes objects (pod templates, env, resources, ports) are preserved as given, since the
compiler already validated them against the pinned Kubernetes schema.
"""

from __future__ import annotations

from typing import Any

from .. import keys
from ..emit import dump
from ..models import MODELS
from ..models.status import PHASES, JobStatus
from .record import ELASTIC_KINDS, PLURALS


def _resolve_ref(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A local $ref inlined; any other $ref is an embedded Kubernetes object, kept as written."""
    ref = schema["$ref"]
    if ref.startswith("#/$defs/"):
        merged = {**defs[ref.rsplit("/", 1)[-1]], **{k: v for k, v in schema.items() if k != "$ref"}}
        return _inline(merged, defs)
    out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if "description" in schema:
        out["description"] = schema["description"]
    return out


def _resolve_any_of(schema: dict[str, Any], defs: dict[str, Any]) -> Any | None:
    """Optional fields (X or null) become X; int-or-string becomes its Kubernetes marker."""
    members = [m for m in schema["anyOf"] if m.get("type") != "null"]
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    if {m.get("type") for m in members} == {"integer", "string"}:
        return {**_clean(rest), "x-kubernetes-int-or-string": True}
    if len(members) == 1:
        return _inline({**members[0], **rest}, defs)
    return None


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    """Resolve $refs and turn pydantic's JSON Schema into a structural OpenAPI v3 schema."""
    if isinstance(schema, list):
        return [_inline(s, defs) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if isinstance(schema.get("$ref"), str):
        return _resolve_ref(schema, defs)
    if "anyOf" in schema:
        resolved = _resolve_any_of(schema, defs)
        if resolved is not None:
            return resolved
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "default", "$defs") or (key == "additionalProperties" and value is False):
            continue  # no CRD defaults (GitOps drift); unknown fields are pruned by the API server
        if key == "properties":
            out[key] = {name: _inline(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _inline(value, defs)
        else:
            out[key] = value
    return out


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("title", "default")}


def spec_schema(kind: str) -> dict[str, Any]:
    """The structural schema of a kind's spec."""
    full = MODELS[kind].model_json_schema(by_alias=True)
    defs = full.get("$defs", {})
    return _inline(full["properties"]["spec"], defs)


# What a record's status reads before its runtime writes one (no lastTransitionTime: the
# runtime's first status sets its own): kstatus reads Reconciling=True as InProgress.
WAITING_MESSAGE = "Waiting for the flatjob runtime (Deployment flatjob in the namespace, or <job>-runtime) to report status."
WAITING_STATUS = {"conditions": [{"type": "Reconciling", "status": "True", "reason": "WaitingForRuntime", "message": WAITING_MESSAGE}]}


def status_schema() -> dict[str, Any]:
    """T9k's JobStatus, plus the runtime's own bookkeeping (restart ledger, attempt)."""
    full = JobStatus.model_json_schema(by_alias=True)
    schema = _inline({k: v for k, v in full.items() if k != "$defs"}, full.get("$defs", {}))
    schema["properties"]["phase"]["enum"] = list(PHASES)
    schema["properties"]["runtime"] = {**schema["properties"]["runtime"], "x-kubernetes-preserve-unknown-fields": True}
    schema["default"] = WAITING_STATUS
    return schema


def crd(kind: str) -> dict[str, Any]:
    """The CRD of one record kind."""
    plural = PLURALS[kind]
    version: dict[str, Any] = {
        "name": "v1beta1",
        "served": True,
        "storage": True,
        "additionalPrinterColumns": [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Running", "type": "integer", "jsonPath": ".status.aggregate.running"},
            {"name": "Restarts", "type": "integer", "jsonPath": ".status.backoffCount"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": f"A {kind} compiled by flatjob: the canonical T9k spec and its status, kept by flatjob's runtime.",
                "properties": {
                    "apiVersion": {"type": "string", "description": "The versioned schema of this object: flatjob.dev/v1beta1."},
                    "kind": {"type": "string", "description": f"The REST resource this object represents: {kind}."},
                    "metadata": {"type": "object", "description": "Standard object metadata."},
                    "spec": spec_schema(kind),
                    "status": status_schema(),
                },
                "required": ["spec"],
            }
        },
        "subresources": {"status": {}},
    }
    if kind in ELASTIC_KINDS:
        version["subresources"]["scale"] = {
            "specReplicasPath": ".spec.elastic.expectedReplicas",
            "statusReplicasPath": ".status.aggregate.running",
            # HPA and KEDA refuse a scale subresource without a selector of the pods they measure;
            # the runtime writes `flatjob.dev/job-name=<job>` there (runtime/decisions/status.py).
            "labelSelectorPath": ".status.selector",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{keys.RECORD_GROUP}", "labels": {keys.APP_MANAGED_BY: keys.MANAGED_BY_VALUE}},
        "spec": {
            "group": keys.RECORD_GROUP,
            "names": {
                "kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(), "categories": ["flatjob"],
                **({"shortNames": list(keys.RECORD_SHORT_NAMES[kind])} if kind in keys.RECORD_SHORT_NAMES else {}),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


HEADER = "# Code generated by flatjob. DO NOT EDIT: run `flatjob schema` to regenerate.\n"


def crd_files() -> dict[str, str]:
    """schemas/crds/<plural>.flatjob.dev.yaml for every kind, plus a kustomization listing them."""
    files = {f"crds/{PLURALS[k]}.{keys.RECORD_GROUP}.yaml": HEADER + dump(crd(k)) for k in sorted(MODELS)}
    resources = sorted(name.split("/", 1)[1] for name in files)
    files["crds/kustomization.yaml"] = HEADER + dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources})
    return files
