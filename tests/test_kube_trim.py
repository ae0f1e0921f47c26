"""Trimming the kubernetes-validate schemas (flatjob.compiler.kube.trim and .prose).

Covers: reading enums and key defaults out of description prose (and refusing prose that
is not a closed list), the trimming rules on a small synthetic schema, the committed
schemas/kubernetes file being canonical and small, and, when kubernetes_validate is
installed at the pinned version, byte-for-byte reproduction of that file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flatjob.compiler.kube import validator
from flatjob.compiler.kube.prose import default_from_prose, enum_from_prose
from flatjob.compiler.kube.trim import installed_schema_dir, main, trim

PROSE_ENUMS = {
    "one-of": ("Image pull policy. One of Always, Never, IfNotPresent. Defaults to Always if "
               ":latest tag is specified.", ("Always", "Never", "IfNotPresent")),
    "must-be": ('Protocol for port. Must be UDP, TCP, or SCTP. Defaults to "TCP".',
                ("UDP", "TCP", "SCTP")),
    "valid-options": ("Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, "
                      'NodePort, and LoadBalancer. "ClusterIP" allocates',
                      ("ExternalName", "ClusterIP", "NodePort", "LoadBalancer")),
    "stray-full-stop": ("Valid operators are In, NotIn, Exists, DoesNotExist. Gt, and Lt.",
                        ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")),
    "single-quotes": ("Valid values are 'ClusterFirstWithHostNet', 'ClusterFirst', 'Default' "
                      "or 'None'. DNS parameters", ("ClusterFirstWithHostNet", "ClusterFirst",
                                                    "Default", "None")),
    "backticks": ("Allowed values are `Cluster` and `Namespaced`.", ("Cluster", "Namespaced")),
    "lowercase-after-values": ("Supported values: cpu, memory.", ("cpu", "memory")),
    "term-list-dashes": ("Valid options are:\n\nLocalhost - a profile. RuntimeDefault - the "
                         "runtime default. Unconfined - no profile.",
                         ("Localhost", "RuntimeDefault", "Unconfined")),
    "term-list-colons": ("Possible values are: Always: pull. Container creation will fail If "
                         "the pull fails. Never: never pull. IfNotPresent: pull if absent. "
                         "Defaults to Always if :latest tag",
                         ("Always", "Never", "IfNotPresent")),
    "openapi-v3-enum-text": ('Possible enum values:\n - `"Always"` means always.\n - '
                             '`"Never"` means never.', ("Always", "Never")),
    "only-allowed-value": ('this field may only be set for init containers, and the only '
                           'allowed value is "Always".', ("Always",)),
}

NOT_ENUMS = {
    "examples-of-an-open-set": 'Must be a filesystem type. Ex. "ext4", "xfs", "ntfs".',
    "enum-plus-free-form": ('Valid values are "None", empty string (""), or a valid IP address.'
                            ' Setting this to "None" makes a headless service'),
    "medium-accepts-hugepages": "Must be an empty string (default) or Memory. More info: x",
    "prose-after-must-be": "Must be a C_IDENTIFIER.",
    "lowercase-after-must-be": "It must be all lowercase or empty.",
    "either-colon": "Valid values are either:\n\n* Un-prefixed protocol names",
    "one-of-a-url": "Exactly one of `url` or `service` must be specified.",
}


@pytest.mark.parametrize("case", list(PROSE_ENUMS), ids=list(PROSE_ENUMS))
def test_enum_from_prose(case: str) -> None:
    text, values = PROSE_ENUMS[case]
    assert enum_from_prose(text) == values


@pytest.mark.parametrize("case", list(NOT_ENUMS), ids=list(NOT_ENUMS))
def test_open_or_unclear_prose_gives_no_enum(case: str) -> None:
    assert enum_from_prose(NOT_ENUMS[case]) is None


def test_default_from_prose() -> None:
    assert default_from_prose('Must be UDP, TCP, or SCTP. Defaults to "TCP".') == "TCP"
    assert default_from_prose("Supports TCP and UDP. Default is TCP.") == "TCP"
    assert default_from_prose("No default here.") is None


def synthetic() -> dict[str, Any]:
    """Return a tiny definitions table shaped like the kubernetes-validate one."""
    ref = "#/$defs/"
    return {
        "x.Root": {
            "type": ["object", "null"], "additionalProperties": False, "required": ["item"],
            "description": "dropped",
            "properties": {
                "item": {"$ref": ref + "x.Item", "description": "required reference"},
                "items": {"type": ["array", "null"], "items": {"$ref": ref + "x.Item"},
                          "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys":
                              ["port", "protocol"], "x-kubernetes-patch-strategy": "merge"},
                "size": {"$ref": ref + "io.k8s.apimachinery.pkg.api.resource.Quantity"},
                "policy": {"type": ["string", "null"], "description": "One of Up, Down."},
            },
        },
        "x.Item": {
            "type": ["object", "null"], "additionalProperties": False, "required": ["port"],
            "properties": {
                "port": {"type": "integer", "format": "int32"},
                "protocol": {"type": ["string", "null"],
                             "description": 'Must be UDP or TCP. Defaults to "TCP".'},
            },
        },
        "x.Unused": {"type": "object"},
        "io.k8s.apimachinery.pkg.api.resource.Quantity":
            {"oneOf": [{"type": ["string", "null"]}, {"type": ["number", "null"]}]},
    }


def test_trim_rules_on_a_synthetic_schema() -> None:
    result = trim(synthetic(), roots=("x.Root",))
    definitions = result["definitions"]
    assert sorted(definitions) == ["io.k8s.apimachinery.pkg.api.resource.Quantity",
                                   "x.Item", "x.Root"]
    root = definitions["x.Root"]["properties"]
    assert "description" not in definitions["x.Root"]
    assert root["item"] == {"allOf": [{"$ref": "#/definitions/x.Item"}], "type": "object"}
    assert root["items"] == {
        "type": ["array", "null"], "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["port", "protocol"],
        "items": {"allOf": [{"$ref": "#/definitions/x.Item"}], "type": "object"}}
    assert root["size"] == {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}
    assert root["policy"] == {"type": ["string", "null"], "enum": ["Down", "Up", None]}
    assert definitions["x.Item"]["properties"]["protocol"] == {
        "type": ["string", "null"], "enum": ["TCP", "UDP", None], "default": "TCP"}
    assert definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] == {
        "format": "quantity", "type": ["number", "string", "null"]}
    assert result["proseEnums"] == ["x.Item.protocol", "x.Root.policy"]


def committed() -> bytes:
    """Return the bytes of the committed trimmed schema."""
    return validator.schema_path().read_bytes()


def test_committed_schema_is_canonical_and_small() -> None:
    data = committed()
    document = json.loads(data)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert data == (canonical + "\n").encode("ascii")
    assert len(data) < 200_000
    meta = document["_meta"]
    assert meta["kubernetes"] == validator.KUBERNETES_VERSION
    assert meta["source"]["package"] == "kubernetes-validate"


@pytest.mark.parametrize(("field", "allowed"), [
    ("io.k8s.api.core.v1.Container.imagePullPolicy", ["", "Always", "IfNotPresent", "Never", None]),
    ("io.k8s.api.core.v1.PodSpec.restartPolicy", ["", "Always", "Never", "OnFailure", None]),
    ("io.k8s.api.core.v1.ServiceSpec.type",
     ["", "ClusterIP", "ExternalName", "LoadBalancer", "NodePort", None]),
    ("io.k8s.api.core.v1.PodSpec.preemptionPolicy", ["Never", "PreemptLowerPriority", None]),
    ("io.k8s.api.core.v1.EmptyDirVolumeSource.medium", None),
    ("io.k8s.api.core.v1.ServiceSpec.clusterIP", None),
])
def test_committed_enums(field: str, allowed: list[Any] | None) -> None:
    definition, name = field.rsplit(".", 1)
    prop = json.loads(committed())["definitions"][definition]["properties"][name]
    assert prop.get("enum") == allowed


def test_trim_reproduces_the_committed_file(tmp_path: Path) -> None:
    source = installed_schema_dir(validator.KUBERNETES_VERSION)
    if source is None:
        pytest.skip("kubernetes_validate is not installed")
    from importlib.metadata import version

    recorded = json.loads(committed())["_meta"]["source"]["version"]
    if version("kubernetes-validate") != recorded:
        pytest.skip(f"kubernetes-validate {version('kubernetes-validate')} is installed, "
                    f"the file was made from {recorded}")
    assert main(["--from", str(source), "--out", str(tmp_path)]) == 0
    produced = tmp_path / f"v{validator.KUBERNETES_VERSION}.json"
    assert produced.read_bytes() == committed()
