"""The job records (flatjob.dev custom resources) through CustomObjectsApi: numbers, pruning,
schema validation, status and scale subresources, as apiextensions-apiserver serves them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from flatjob.compiler.render.crd import WAITING_STATUS
from flatjob.runtime.sim.apiserver.customresources import number

from .fakeserverkit import (  # noqa: F401
    GROUP,
    PLURAL,
    VERSION,
    api,
    call,
    custom,
    failure,
    ns,
    raw,
    record,
    server,
)


def _create(api, ns, body=None):  # noqa: F811
    return call(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, body or record())


@pytest.mark.parametrize(("sent", "stored"), [
    (1.0, 1), (2.5, 2.5), (1, 1), (-0.0, 0), (1e20, 100000000000000000000), (1e21, 1e21),
    (2**63, 9223372036854776000), (12345678901234567890, 12345678901234567000), (True, True),
])
def test_numbers_read_back_as_the_unstructured_json_decoder_leaves_them(sent, stored) -> None:
    assert number(sent) == stored and type(number(sent)) is type(stored)


def test_an_integral_float_comes_back_as_an_int(api, ns, server) -> None:  # noqa: F811
    body = record()
    body["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": 1.0, "nvidia.com/gpu": 1}}
    code, _, _ = raw(server, "POST", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}", body)
    assert code == 201
    got = call(custom(api).get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")
    limits = got["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": 1, "nvidia.com/gpu": 1} and isinstance(limits["cpu"], int)
    assert got["metadata"]["generation"] == 1 and got["status"] == WAITING_STATUS  # created without status: the CRD's default


def test_unknown_fields_are_pruned_with_a_warning(server, ns) -> None:  # noqa: F811
    body = record()
    body["spec"]["colour"] = "blue"
    code, got, headers = raw(server, "POST", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}", body)
    assert code == 201 and "colour" not in got["spec"]
    assert headers["Warning"] == '299 - "unknown field \\"spec.colour\\""'


def test_schema_violations_are_422_with_kube_openapis_words(api, ns) -> None:  # noqa: F811
    body = record()
    body["spec"]["replicaSpecs"][0]["restartPolicy"] = "Sometimes"
    body["spec"]["replicaSpecs"][0]["replicas"] = "two"
    code, status = failure(custom(api).create_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, body)
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'PyTorchTrainingJob.flatjob.dev "j" is invalid: [spec.replicaSpecs[0].replicas: Invalid value: "two": '
        'spec.replicaSpecs[0].replicas in body must be of type integer: "string", spec.replicaSpecs[0].restartPolicy: '
        'Unsupported value: "Sometimes": supported values: "Never", "OnFailure", "Always", "ExitCode"]'
    )
    assert status["details"]["group"] == GROUP and status["details"]["kind"] == "PyTorchTrainingJob"


def test_list_and_watch_by_name(api, ns) -> None:  # noqa: F811
    _create(api, ns)
    _create(api, ns, record("k"))
    got = call(custom(api).list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, field_selector="metadata.name=j")
    assert [o["metadata"]["name"] for o in got["items"]] == ["j"] and got["items"][0]["kind"] == "PyTorchTrainingJob"
    code, status = failure(custom(api).list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, field_selector="spec.x=1")
    assert (code, status["message"]) == (400, '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"')


def test_updates_need_a_resource_version_and_a_current_one(api, ns) -> None:  # noqa: F811
    created = _create(api, ns)
    body = copy.deepcopy(created)
    del body["metadata"]["resourceVersion"]
    code, status = failure(custom(api).replace_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j", body)
    assert (code, status["message"]) == (422, 'pytorchtrainingjobs.flatjob.dev "j" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update')
    body = copy.deepcopy(created)
    body["spec"]["replicaSpecs"][0]["replicas"] = 2
    call(custom(api).replace_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j", body)
    code, status = failure(custom(api).replace_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j", body)
    assert (code, status["reason"]) == (409, "Conflict")
    assert status["message"] == 'Operation cannot be fulfilled on pytorchtrainingjobs.flatjob.dev "j": the object has been modified; please apply your changes to the latest version and try again'


def test_status_and_spec_writes_stay_in_their_lanes(api, ns) -> None:  # noqa: F811
    created = _create(api, ns)
    body = copy.deepcopy(created)
    body["spec"]["replicaSpecs"][0]["replicas"] = 9
    body["status"] = {"phase": "Running"}
    after = call(custom(api).replace_namespaced_custom_object_status, GROUP, VERSION, ns, PLURAL, "j", body)
    assert after["spec"] == created["spec"] and after["status"] == {"phase": "Running"} and after["metadata"]["generation"] == 1
    body = copy.deepcopy(after)
    body["spec"]["replicaSpecs"][0]["replicas"] = 3
    body["status"] = {"phase": "Failed"}
    after = call(custom(api).replace_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j", body)
    assert after["status"] == {"phase": "Running"} and after["metadata"]["generation"] == 2
    after = call(custom(api).patch_namespaced_custom_object_status, GROUP, VERSION, ns, PLURAL, "j", {"status": {"phase": "Succeeded"}})
    assert after["status"] == {"phase": "Succeeded"} and after["metadata"]["generation"] == 2


def test_strategic_merge_patches_are_refused_on_custom_resources(api, ns, server) -> None:  # noqa: F811
    _create(api, ns)
    code, status, _ = raw(server, "PATCH", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}/j", {"metadata": {"labels": {"a": "b"}}}, "application/strategic-merge-patch+json")
    assert (code, status["reason"]) == (415, "UnsupportedMediaType")


def test_scale_reads_and_writes_expected_replicas(api, ns) -> None:  # noqa: F811
    _create(api, ns)
    scale = call(custom(api).get_namespaced_custom_object_scale, GROUP, VERSION, ns, PLURAL, "j")
    assert (scale["kind"], scale["apiVersion"], scale["spec"], scale["status"]) == ("Scale", "autoscaling/v1", {"replicas": 2}, {"replicas": 0, "selector": ""})  # no status yet: no selector
    after = call(custom(api).patch_namespaced_custom_object_scale, GROUP, VERSION, ns, PLURAL, "j", {"spec": {"replicas": 3}})
    assert after["spec"]["replicas"] == 3
    got = call(custom(api).get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")
    assert got["spec"]["elastic"]["expectedReplicas"] == 3 and got["metadata"]["generation"] == 2
    scale = dict(after, spec={"replicas": 4})
    assert call(custom(api).replace_namespaced_custom_object_scale, GROUP, VERSION, ns, PLURAL, "j", scale)["spec"]["replicas"] == 4


def test_a_scale_write_the_crd_schema_refuses_is_422(api, ns) -> None:  # noqa: F811
    _create(api, ns)
    code, status = failure(custom(api).patch_namespaced_custom_object_scale, GROUP, VERSION, ns, PLURAL, "j", {"spec": {"replicas": 0}})
    assert (code, status["message"]) == (422, 'PyTorchTrainingJob.flatjob.dev "j" is invalid: spec.elastic.expectedReplicas: Invalid value: 0: spec.elastic.expectedReplicas in body should be greater than or equal to 1')
    code, status = failure(custom(api).patch_namespaced_custom_object_scale, GROUP, VERSION, ns, PLURAL, "j", {"spec": {"replicas": -1}})
    assert (code, status["message"]) == (422, 'Scale.autoscaling "j" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')
    assert call(custom(api).get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")["spec"]["elastic"]["expectedReplicas"] == 2


def test_records_answer_a_delete_with_a_status(api, ns) -> None:  # noqa: F811
    uid = _create(api, ns)["metadata"]["uid"]
    got = call(custom(api).delete_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")
    assert got == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": {"name": "j", "group": GROUP, "kind": PLURAL, "uid": uid}}
    code, status = failure(custom(api).get_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, "j")
    assert (code, status["message"]) == (404, 'pytorchtrainingjobs.flatjob.dev "j" not found')


def test_podgroups_keep_every_field(api, ns) -> None:  # noqa: F811
    body = {"apiVersion": "scheduler.tensorstack.dev/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"minMember": 2, "queue": "q", "x": 1.0}}
    call(custom(api).create_namespaced_custom_object, "scheduler.tensorstack.dev", "v1beta1", ns, "podgroups", body)
    got = call(custom(api).get_namespaced_custom_object, "scheduler.tensorstack.dev", "v1beta1", ns, "podgroups", "g")
    assert got["spec"] == {"minMember": 2, "queue": "q", "x": 1}


def _defaulted_everywhere(value, schema):  # the walk before subtrees without defaults were skipped
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_defaulted_everywhere(v, schema["items"]) for v in value]
    if not isinstance(value, dict):
        return value
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None
    out = {k: copy.deepcopy(sub["default"]) for k, sub in props.items() if k not in value and "default" in sub}
    return {**{k: _defaulted_everywhere(v, props.get(k, extra)) if isinstance(props.get(k, extra), dict) else v for k, v in value.items()}, **out}


@pytest.mark.parametrize("example", ["pytorch-ddp", "deepspeed", "genericjob-tfconfig", "colossalai"])
def test_defaulting_skips_only_subtrees_without_defaults(example: str) -> None:
    """The record of each example, with a status, defaults as the full walk defaults it, and a
    status (whose schema declares no default) comes back as the same object."""
    from manifestkit import compiled_objects

    from flatjob.runtime.sim.apiserver.customresources import defaulted, shipped

    text = (Path(__file__).resolve().parents[2] / "examples" / f"{example}.yaml").read_text()
    kinds = {c.kind: c for c in shipped()}
    record = next(o for o in compiled_objects(text) if o["kind"] in kinds and o["apiVersion"].startswith("flatjob.dev/"))
    schema = kinds[record["kind"]].schema
    record["status"] = {"phase": "Running", "tasks": [{"type": "worker", "replicas": [{"name": "w-0", "status": "Running"}]}], "conditions": []}
    assert defaulted(record, schema) == _defaulted_everywhere(record, schema)
    assert defaulted(record["status"], schema["properties"]["status"]) is record["status"]
    bare = {"spec": {k: {} if isinstance(v, dict) else v for k, v in record["spec"].items()}}
    assert defaulted(bare, schema) == _defaulted_everywhere(bare, schema) != bare  # some default fills it
