"""Strict Kubernetes schema validation (flatjob.compiler.kube).

Covers: one malformed pod template per violation code with exact path, code and message;
the enums Kubernetes keeps in prose (imagePullPolicy, restartPolicy, protocol, Service
type); quantity, int32, base64 and date-time formats; duplicate list-map keys; null
handling; manifest dispatch by apiVersion/kind; lazy loading; a property test that the
validator never raises; and an oracle test that its verdict equals jsonschema's on the
same trimmed schema.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.compiler.kube import KUBERNETES_VERSION, Violation, validate, validate_manifest
from flatjob.compiler.kube import validator as kube_validator
from flatjob.compiler.kube.formats import FORMATS

POD_TEMPLATE = "io.k8s.api.core.v1.PodTemplateSpec"
SERVICE = "io.k8s.api.core.v1.Service"
DEPLOYMENT = "io.k8s.api.apps.v1.Deployment"

PROPERTY_SETTINGS = settings(
    max_examples=examples(150), derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def pod_template() -> dict[str, Any]:
    """Return a valid worker pod template like the ones flatjob renders."""
    return {
        "metadata": {"labels": {"app": "mnist", "rank": "0"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "pytorch",
                "image": "pytorch:2.3",
                "imagePullPolicy": "IfNotPresent",
                "command": ["torchrun", "train.py"],
                "env": [{"name": "RANK", "value": "0"},
                        {"name": "POD_IP",
                         "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "ports": [{"name": "c10d", "containerPort": 29500}],
                "resources": {"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }],
            "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def service() -> dict[str, Any]:
    """Return a valid headless Service."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "mnist", "namespace": "team-a"},
        "spec": {"clusterIP": "None", "type": "ClusterIP", "selector": {"app": "mnist"},
                 "ports": [{"name": "c10d", "port": 29500, "targetPort": "c10d"}]},
    }


def deployment() -> dict[str, Any]:
    """Return a valid Deployment around the pod template."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "board"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "mnist"}},
                 "strategy": {"type": "Recreate"}, "template": pod_template()},
    }


def changed(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """Return a deep copy of `base` with the value at `path` replaced (or added at the end)."""
    result = copy.deepcopy(base)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    if isinstance(parent, list) and path[-1] == len(parent):
        parent.append(value)
    else:
        parent[path[-1]] = value
    return result


def removed(base: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    """Return a deep copy of `base` without the key at `path`."""
    result = copy.deepcopy(base)
    parent = result
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return result


C0 = ("spec", "containers", 0)


# --- one malformed pod template per violation code -------------------------------------

MALFORMED = {
    "FJ400-unknown-field": (
        changed(pod_template(), (*C0, "imagePullPolicyy"), "Always"),
        Violation((*C0, "imagePullPolicyy"), "FJ400",
                  "unknown field 'imagePullPolicyy' in Container",
                  key=True, hint="did you mean 'imagePullPolicy'?"),
    ),
    "FJ401-string-for-integer": (
        changed(pod_template(), (*C0, "ports", 0, "containerPort"), "29500"),
        Violation((*C0, "ports", 0, "containerPort"), "FJ401", "expected integer, got string"),
    ),
    "FJ401-bool-is-not-integer": (
        changed(pod_template(), ("spec", "terminationGracePeriodSeconds"), True),
        Violation(("spec", "terminationGracePeriodSeconds"), "FJ401",
                  "expected integer, got boolean"),
    ),
    "FJ401-object-for-list": (
        changed(pod_template(), (*C0, "env"), {"RANK": "0"}),
        Violation((*C0, "env"), "FJ401", "expected array, got object"),
    ),
    "FJ402-bad-enum": (
        changed(pod_template(), (*C0, "imagePullPolicy"), "Sometimes"),
        Violation((*C0, "imagePullPolicy"), "FJ402",
                  "'Sometimes' is not one of Always, IfNotPresent, Never"),
    ),
    "FJ403-missing-required": (
        removed(pod_template(), (*C0, "name")),
        Violation(C0, "FJ403", "missing required field 'name' in Container"),
    ),
    "FJ403-required-null": (
        changed(pod_template(), ("spec", "containers"), None),
        Violation(("spec", "containers"), "FJ403",
                  "required field 'containers' in PodSpec is null"),
    ),
    "FJ404-bad-quantity": (
        changed(pod_template(), (*C0, "resources", "limits", "memory"), "16GB"),
        Violation((*C0, "resources", "limits", "memory"), "FJ404",
                  "'16GB' is not a valid quantity (e.g. '500m', '2Gi', '1.5')"),
    ),
    "FJ404-int32-overflow": (
        changed(pod_template(), (*C0, "ports", 0, "containerPort"), 2**31),
        Violation((*C0, "ports", 0, "containerPort"), "FJ404",
                  "2147483648 is out of range for int32"),
    ),
    "FJ405-duplicate-container": (
        changed(pod_template(), ("spec", "containers", 1), {"name": "pytorch", "image": "x"}),
        Violation(("spec", "containers", 1), "FJ405",
                  "duplicate name='pytorch' (first at index 0)"),
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_pod_template_gives_exactly_one_violation(case: str) -> None:
    template, expected = MALFORMED[case]
    assert validate(template, POD_TEMPLATE) == [expected]


def test_valid_manifests_pass() -> None:
    assert validate(pod_template(), POD_TEMPLATE) == []
    assert validate_manifest(service()) == []
    assert validate_manifest(deployment()) == []


# --- enums Kubernetes states only in descriptions ---------------------------------------

ENUMS = {
    "imagePullPolicy": (pod_template(), (*C0, "imagePullPolicy"), "always",
                        "'always' is not one of Always, IfNotPresent, Never",
                        "did you mean 'Always'?"),
    "restartPolicy": (pod_template(), ("spec", "restartPolicy"), "Sometimes",
                      "'Sometimes' is not one of Always, Never, OnFailure", None),
    "container-port-protocol": (pod_template(), (*C0, "ports", 0, "protocol"), "tcp",
                                "'tcp' is not one of SCTP, TCP, UDP", "did you mean 'TCP'?"),
    "toleration-operator": (pod_template(), ("spec", "tolerations", 0, "operator"), "Equals",
                            "'Equals' is not one of Equal, Exists", "did you mean 'Equal'?"),
    "service-type": (service(), ("spec", "type"), "LoadBalancers",
                     "'LoadBalancers' is not one of ClusterIP, ExternalName, LoadBalancer, "
                     "NodePort", "did you mean 'LoadBalancer'?"),
    "service-port-protocol": (service(), ("spec", "ports", 0, "protocol"), "HTTP",
                              "'HTTP' is not one of SCTP, TCP, UDP", None),
    "preemption-policy-rejects-empty": (pod_template(), ("spec", "preemptionPolicy"), "",
                                        "'' is not one of Never, PreemptLowerPriority", None),
}


@pytest.mark.parametrize("case", list(ENUMS), ids=list(ENUMS))
def test_enums_from_descriptions_are_enforced(case: str) -> None:
    base, path, value, message, hint = ENUMS[case]
    obj = changed(base, path, value)
    found = validate_manifest(obj) if "kind" in obj else validate(obj, POD_TEMPLATE)
    assert found == [Violation(path, "FJ402", message, hint=hint)]


@pytest.mark.parametrize("path", [
    (*C0, "imagePullPolicy"), ("spec", "restartPolicy"), (*C0, "ports", 0, "protocol"),
    ("spec", "tolerations", 0, "operator"), ("spec", "tolerations", 0, "effect"),
])
def test_empty_string_passes_where_the_server_defaults_it(path: tuple[Any, ...]) -> None:
    assert validate(changed(pod_template(), path, ""), POD_TEMPLATE) == []


@pytest.mark.parametrize("value", ["Always", "IfNotPresent", "Never", None])
def test_every_allowed_pull_policy_passes(value: str | None) -> None:
    assert validate(changed(pod_template(), (*C0, "imagePullPolicy"), value), POD_TEMPLATE) == []


# --- formats ----------------------------------------------------------------------------

GOOD_QUANTITIES = ["1", "0", "0.5", "500m", "2Gi", "1.5Gi", "1e3", "1E3", "1e-3", "+1", "-1",
                   ".5", "1.", " 1Gi ", "100n", "5u", "1k", "1M", "1Ei", "1E", 1, 0, 1.5, 10**20,
                   # the exponent is an int64 (suffixHandler.interpret: strconv.ParseInt(..., 10, 64))
                   "1e9223372036854775807", "1e-9223372036854775808", "1e+000000000000000000000005",
                   # review of round 8 #5: int32(parsed) wraps it to 1e0; leading zeros are no ValueError
                   "1e4294967296", "1e-" + "0" * 5000 + "5"]
BAD_QUANTITIES = ["", " ", "1.5.5", "16GB", "1ki", "1KI", "one", "1 Gi", "1e", "1e1.5",
                  "1Mi3", "--1", "1,5", "0x10",
                  # review 21 r7 #4: ParseInt fails, so ErrSuffix refuses the whole request
                  "1e9223372036854775808", "1E-9223372036854775809", "1e99999999999999999999", "1e" + "9" * 5000]


@pytest.mark.parametrize("value", GOOD_QUANTITIES, ids=repr)
def test_good_quantities_pass(value: Any) -> None:
    template = changed(pod_template(), (*C0, "resources", "requests"), {"cpu": value})
    assert validate(template, POD_TEMPLATE) == []


@pytest.mark.parametrize("value", BAD_QUANTITIES, ids=repr)
def test_bad_quantities_fail(value: str) -> None:
    path = (*C0, "resources", "limits", "cpu")
    [found] = validate(changed(pod_template(), path, value), POD_TEMPLATE)
    assert (found.path, found.code) == (path, "FJ404")


@pytest.mark.parametrize(("value", "got"), [(True, "boolean"), ([1], "array"), ({}, "object")])
def test_quantity_of_wrong_type(value: Any, got: str) -> None:
    path = (*C0, "resources", "limits", "cpu")
    assert validate(changed(pod_template(), path, value), POD_TEMPLATE) == [
        Violation(path, "FJ401", f"expected number or string, got {got}")]


def test_integral_float_is_an_integer_but_a_fraction_is_not() -> None:
    path = (*C0, "ports", 0, "containerPort")
    assert validate(changed(pod_template(), path, 29500.0), POD_TEMPLATE) == []
    assert validate(changed(pod_template(), path, 29500.5), POD_TEMPLATE) == [
        Violation(path, "FJ401", "expected integer, got number")]


def test_int_or_string_accepts_both_and_nothing_else() -> None:
    path = ("spec", "ports", 0, "targetPort")
    assert validate_manifest(changed(service(), path, 8080)) == []
    assert validate_manifest(changed(service(), path, "c10d")) == []
    assert validate_manifest(changed(service(), path, 1.5)) == [
        Violation(path, "FJ401", "expected integer or string, got number")]
    assert validate_manifest(changed(service(), path, 2**31)) == [
        Violation(path, "FJ404", "2147483648 is out of range for int32")]


def test_secret_data_must_be_base64() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "data": {"ok": "aGVsbG8=", "bad": "hello!"}}
    assert validate_manifest(secret) == [
        Violation(("data", "bad"), "FJ404", "'hello!' is not valid base64")]


@pytest.mark.parametrize(("value", "ok"), [
    ("2025-01-31T12:00:00Z", True), ("2024-02-29T00:00:00.5+01:00", True), (None, True),
    ("2025-02-29T00:00:00Z", False), ("2025-01-31 12:00:00Z", False), ("yesterday", False),
])
def test_date_time_format(value: str | None, ok: bool) -> None:
    found = validate(changed(pod_template(), ("metadata", "creationTimestamp"), value),
                     POD_TEMPLATE)
    assert (found == []) is ok
    assert all(v.code == "FJ404" for v in found)


# --- duplicate list-map keys ------------------------------------------------------------

DUPLICATES = {
    "container": (("spec", "containers"), [{"name": "a"}, {"name": "b"}, {"name": "a"}],
                  ("spec", "containers", 2), "duplicate name='a' (first at index 0)"),
    "env": ((*C0, "env"), [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}],
            (*C0, "env", 1), "duplicate name='X' (first at index 0)"),
    "volume": (("spec", "volumes"), [{"name": "d", "emptyDir": {}}, {"name": "d"}],
               ("spec", "volumes", 1), "duplicate name='d' (first at index 0)"),
    "port-with-defaulted-protocol": (
        (*C0, "ports"), [{"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"}],
        (*C0, "ports", 1), "duplicate containerPort=80, protocol='TCP' (first at index 0)"),
}


@pytest.mark.parametrize("case", list(DUPLICATES), ids=list(DUPLICATES))
def test_duplicate_list_map_keys(case: str) -> None:
    where, items, path, message = DUPLICATES[case]
    template = changed(pod_template(), where, items)
    if where == ("spec", "volumes"):
        template["spec"]["containers"][0].pop("volumeMounts")
    assert validate(template, POD_TEMPLATE) == [Violation(path, "FJ405", message)]


def test_same_port_on_other_protocol_is_not_a_duplicate() -> None:
    ports = [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53}]
    assert validate(changed(pod_template(), (*C0, "ports"), ports), POD_TEMPLATE) == []


# --- nulls, dispatch, loading ------------------------------------------------------------

def test_null_is_dropped_for_optional_fields() -> None:
    template = pod_template()
    container = template["spec"]["containers"][0]
    container.update(image=None, resources=None, env=None, lifecycle=None, command=None)
    template["spec"].update(volumes=None, nodeSelector=None)
    template["spec"]["containers"][0].pop("volumeMounts")
    template["metadata"]["labels"]["app"] = None
    assert validate(template, POD_TEMPLATE) == []


def test_null_list_item_of_objects_is_rejected() -> None:
    template = changed(pod_template(), (*C0, "env", 1), None)
    assert validate(template, POD_TEMPLATE) == [
        Violation((*C0, "env", 1), "FJ401", "expected object, got null")]


def test_manifest_dispatch_by_api_version_and_kind() -> None:
    broken = changed(deployment(), ("spec", "template", *C0, "imagePullPolicy"), "Sometimes")
    [found] = validate_manifest(broken)
    assert found.path == ("spec", "template", *C0, "imagePullPolicy")
    assert validate_manifest({"apiVersion": "batch/v1", "kind": "Job", "spec": 1}) == []
    assert validate_manifest({"apiVersion": "v1", "kind": "Pod", "bogus": 1}) == [
        Violation(("bogus",), "FJ400", "unknown field 'bogus' in Pod", key=True)]
    assert validate_manifest(["not", "a", "manifest"]) == []
    assert validate_manifest({"apiVersion": ["v1"], "kind": "Pod"}) == []


def test_unknown_definition_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no definition"):
        validate({}, "io.k8s.api.core.v1.Nope")


def test_schema_file_sits_next_to_compiler() -> None:
    path = kube_validator.schema_path()
    assert path == (Path(kube_validator.__file__).resolve().parents[2]
                    / "schemas" / "kubernetes" / f"v{KUBERNETES_VERSION}.json")
    assert kube_validator.load_schema()["_meta"]["kubernetes"] == KUBERNETES_VERSION


def test_import_loads_nothing() -> None:
    probe = ("import sys, flatjob.compiler.kube.validator as v; "
             "assert v.load_schema.cache_info().currsize == 0; "
             "assert 'flatjob.compiler.kube.checkers' not in sys.modules; "
             "assert 'jsonschema' not in sys.modules")
    subprocess.run([sys.executable, "-c", probe], check=True, env=dict(os.environ))


# --- property tests ---------------------------------------------------------------------

def field_names() -> list[str]:
    """Return every property name in the trimmed schema, so generated keys hit real fields."""
    definitions = kube_validator.load_schema()["definitions"].values()
    return sorted({name for d in definitions for name in d.get("properties", {})})


FIELD_NAMES = field_names()
scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=6) | st.sampled_from(["Always", "TCP", "1Gi", "", "v1", "Pod"]))
keys = st.sampled_from(FIELD_NAMES) | st.text(max_size=5) | st.integers() | st.booleans()
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=25,
)


@functools.lru_cache(maxsize=1)
def definition_names() -> tuple[str, ...]:
    """Return every definition in the trimmed schema."""
    return tuple(sorted(kube_validator.load_schema()["definitions"]))


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """List the path of every node below `value` (not `value` itself)."""
    found: list[tuple[Any, ...]] = []
    children = (value.items() if isinstance(value, dict)
                else enumerate(value) if isinstance(value, list) else ())
    for step, child in children:
        found.append((*prefix, step))
        found.extend(paths(child, (*prefix, step)))
    return found


interesting = (
    scalars | st.just({}) | st.just([]) | st.just({"name": "x"})
    | st.sampled_from(["IfNotPresent", "Never", "SCTP", "NodePort", "Exists", "500m", "2GB",
                       "1e3", "-", "aGk=", "2025-01-31T12:00:00Z", 2**31, 8080.0, -1])
)


leaf_values = st.sampled_from([
    "Always", "always", "", "IfNotPresent", "Never", "OnFailure", "TCP", "tcp", "UDP", "SCTP",
    "NodePort", "Exists", "Equal", "Recreate", "RollingUpdate", "500m", "2GB", "1e3", "1.5.5",
    "-", " 1Gi ", "aGk=", "2025-01-31T12:00:00Z", "2025-13-01T00:00:00Z", "c10d", "v1",
    0, 1, -1, 65535, 2**31 - 1, 2**31, -(2**63) - 1, 8080.0, 0.5, True,
])


def at(obj: Any, path: tuple[Any, ...]) -> Any:
    """Return the value at `path`."""
    for step in path:
        obj = obj[step]
    return obj


@st.composite
def mutated(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> tuple[str, dict[str, Any]]:
    """Draw a valid manifest with one to three random edits using `values`."""
    definition, obj = draw(st.sampled_from([
        (POD_TEMPLATE, pod_template()), (SERVICE, service()), (DEPLOYMENT, deployment())]))
    for _ in range(draw(st.integers(1, 3))):
        everywhere = paths(obj)
        leaves = [p for p in everywhere if isinstance(at(obj, p), (str, int))]
        if not leaves:
            break
        path = draw(st.sampled_from(everywhere))
        action = draw(st.sampled_from(["set", "leaf", "leaf", "delete", "add"]))
        if action == "leaf":
            obj = changed(obj, draw(st.sampled_from(leaves)), draw(leaf_values))
        elif action == "set":
            obj = changed(obj, path, draw(values))
        elif action == "delete" and isinstance(path[-1], str):
            obj = removed(obj, path)
        elif action == "add" and isinstance(at(obj, path[:-1]), dict):
            obj = changed(obj, (*path[:-1], draw(st.sampled_from(FIELD_NAMES))), draw(values))
    return definition, obj


@functools.cache
def oracle(definition: str) -> Any:
    """Return a jsonschema Draft7Validator for one definition of the same trimmed schema."""
    from jsonschema import Draft7Validator, FormatChecker

    checker = FormatChecker(formats=())
    for name, (accepts, _) in FORMATS.items():
        checker.checks(name)(accepts)
    schema = json.loads(kube_validator.schema_path().read_bytes())
    return Draft7Validator({**schema, "$ref": f"#/definitions/{definition}"},
                           format_checker=checker)


@settings(PROPERTY_SETTINGS, max_examples=examples(300))
@given(case=mutated(interesting))
def test_verdict_matches_jsonschema(case: tuple[str, dict[str, Any]]) -> None:
    definition, obj = case
    # jsonschema cannot express list-map key uniqueness, nor the name syntax the API server
    # checks beyond the schema (checkers.NAMES); everything else it sees too.
    ours = [v for v in validate(obj, definition) if v.code != "FJ405" and not (v.code == "FJ404" and v.path and v.path[-1] == "name")]
    theirs = list(oracle(definition).iter_errors(obj))
    assert (not ours) == (not theirs), (ours, [e.message for e in theirs])


@PROPERTY_SETTINGS
@given(value=anything, data=st.data())
def test_validator_never_raises(value: Any, data: st.DataObject) -> None:
    definition = data.draw(st.sampled_from(definition_names()))
    assert all(isinstance(v, Violation) for v in validate(value, definition))
    manifest = {"apiVersion": data.draw(st.sampled_from(["v1", "apps/v1"])),
                "kind": data.draw(st.sampled_from(["Pod", "Service", "Deployment", "Secret"])),
                "spec": value, "metadata": value, "data": value}
    validate_manifest(manifest)
    definition, obj = data.draw(mutated(anything))
    validate(obj, definition)


def test_slips_no_edit_distance_finds_get_the_field_they_mean() -> None:
    """`secret: {name: ...}` (T9k's own manual), `configMap: {secretName}`, `persistentVolumeClaim: {name}`..."""
    from flatjob.compiler.kube.checkers import _SLIPS

    spec = {
        "containers": [{"name": "c", "image": "i", "environment": [], "cmd": [], "arguments": [], "workdir": "/", "mounts": []}],
        "volumes": [
            {"name": "a", "secret": {"name": "x"}},
            {"name": "b", "configMap": {"secretName": "x"}},
            {"name": "c", "persistentVolumeClaim": {"claimName": "x", "name": "x", "claim": "x"}},
            {"name": "d", "pvc": {}, "configmap": {}},
        ],
    }
    found = {(v.path[-1], v.hint) for v in validate({"metadata": {}, "spec": spec}, POD_TEMPLATE) if v.code == "FJ400"}
    assert found == {(word, f"did you mean {field!r}?") for (_, word), field in _SLIPS.items()}
