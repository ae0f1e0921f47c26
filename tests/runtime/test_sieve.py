"""runtime.sieve: a dense record's spec and status are taken out of its text unparsed.

Ten records whose statuses (or specs, under a pod template) someone filled with 1.3 MB of
small objects took the namespace runtime to 136.5 MiB (225 MiB for the specs) of its 128,
parsed at each watch event, list page and write answer (issue 21 round 2). The figures are
bench/hostile_runtime.py's (junk_statuses, junk_specs); these tests pin the shapes.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from flatjob.runtime import nesting, sieve, trim

JUNK = [{"a": 0} for _ in range(nesting.DENSE_VALUES)]


def _record(status: Any = None, template: Any = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"apiVersion": "flatjob.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "j", "annotations": {"a": "b"}},
                           "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": template or {"spec": {}}}]}}
    if status is not None:
        rec["status"] = status
    return rec


@pytest.mark.parametrize("sep", [(",", ":"), (", ", ": ")], ids=["compact", "spaced"])
def test_members_are_lifted_as_their_text_whatever_their_strings_hold(sep: tuple[str, str]) -> None:
    tricky = {"a": ["}", "]", '"{', "\\", "\\\"[", "\u00e9\u2028"], "b": {"spec": {"status": 1}}}
    event = {"type": "MODIFIED", "object": {"kind": "K", "metadata": {"name": "n", "annotations": {"spec": "status"}}, "spec": tricky, "status": [tricky], "z": "spec"}}
    raw = json.dumps(event, separators=sep, ensure_ascii=False).encode()
    text, values = sieve.lift(raw, (2,), ("spec", "status"))
    assert len(values) == 2 and b"tricky" not in text
    back = sieve.restore(json.loads(text), values)
    assert [json.loads(back["object"][k]) for k in ("spec", "status")] == [tricky, [tricky]]
    assert back["object"]["metadata"] == event["object"]["metadata"] and back["object"]["z"] == "spec"


def test_a_sparse_text_is_parsed_whole_and_a_dense_one_keeps_its_spec_and_status_as_bytes() -> None:
    small = json.dumps({"type": "ADDED", "object": _record({"phase": "Running"})}).encode()
    assert sieve.loads(small, sieve.members((2,), trim.RECORD_LIFT))["object"]["status"] == {"phase": "Running"}
    dense = json.dumps({"type": "ADDED", "object": _record({"phase": "Running", "runtime": {"attempt": 2, "x": JUNK}})}, separators=(",", ":")).encode()
    tracemalloc.start()
    got = sieve.loads(dense, sieve.members((2,), trim.RECORD_LIFT))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(got["object"]["status"], bytes) and isinstance(got["object"]["spec"], bytes)
    assert peak < 4 * len(dense)  # parsed, the junk alone is ~25 times its bytes
    kept = trim.record(got["object"])
    assert kept["status"] == len(got["object"]["status"])  # more than this job's status can be: its size
    assert trim.spec_of(kept) == {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": {}}]}  # kept without trim.UNREAD


def test_a_lifted_status_that_fits_is_cached_as_its_bytes() -> None:
    status = {"phase": "Running", "runtime": {"attempt": 2}}
    dense = json.dumps({"type": "ADDED", "object": _record(status, template={"metadata": {"x": JUNK}})}, separators=(",", ":")).encode()
    got = sieve.loads(dense, sieve.members((2,), trim.RECORD_LIFT))
    kept = trim.record(got["object"])
    assert isinstance(kept["status"], bytes) and trim.status_of(kept) == status
    assert trim.spec_of(kept) == {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": {}}]}  # a dense one without its templates


def test_a_stand_in_someone_wrote_is_theirs() -> None:
    """A stand-in carries its lift's random mark: one written in an annotation stayed a lifted
    value's name, and the annotation became the spec's bytes (or went)."""
    annotations = {"x": sieve.LIFTED + "0", "y": sieve.LIFTED + "9", "z": "\u0000flatjob:lifted:0"}
    raw = json.dumps({"object": {"metadata": {"annotations": annotations}, "spec": {"a": 1}}}).encode()
    text, values = sieve.lift(raw, (2,), ("spec",))
    back = sieve.restore(json.loads(text), values)
    assert json.loads(back["object"]["spec"]) == {"a": 1} and back["object"]["metadata"]["annotations"] == annotations


def test_a_value_nested_past_the_cut_is_lifted_cut() -> None:
    deep: Any = 0
    for _ in range(400):
        deep = [deep]
    raw = json.dumps({"object": {"status": {"x": deep}}}).encode()
    _, values = sieve.lift(raw, (2,), ("status",))
    assert json.loads(values[0])  # parses: cut at nesting.CUT_DEPTH
    assert nesting.TOO_DEEP.encode() in values[0]


def test_text_that_is_not_json_stays_not_json() -> None:
    for raw in (b'{"object": {"spec": {"a": [1, 2}', b'{"object": {"spec": ', b"[[[", b'"abc'):
        with pytest.raises(ValueError):
            text, _ = sieve.lift(raw, (2,), ("spec",))
            json.loads(text)


def test_a_status_read_from_a_dense_list_page_keeps_only_the_ledger_and_what_fits() -> None:
    """worker._read_status lists the record with trim.STATUS_LIFT: the spec and each status
    member but the ledger's come as bytes, and status_read parses only what it keeps."""
    rec = _record({"phase": "Running", "conditions": [{"type": "Ready"}], "x": JUNK, "runtime": {"attempt": 3, "released": ["j-worker-0"], "x": JUNK}})
    page = json.dumps({"metadata": {}, "items": [rec]}, separators=(",", ":")).encode()
    item = sieve.loads(page, trim.STATUS_LIFT)["items"][0]
    assert isinstance(item["spec"], bytes) and isinstance(item["status"]["x"], bytes) and isinstance(item["status"]["runtime"]["x"], bytes)
    assert trim.status_read(item["status"], trim.status_limit(2, 3)) == {"phase": "Running", "conditions": [{"type": "Ready"}], "runtime": {"attempt": 3, "released": ["j-worker-0"]}}
    bad = _record({"runtime": {"attempt": 3, "restarts": {f"t{i}": 1 for i in range(nesting.DENSE_VALUES)}}})
    item = sieve.loads(json.dumps({"items": [bad]}).encode(), trim.STATUS_LIFT)["items"][0]
    with pytest.raises(ValueError, match=r"status\.runtime\.restarts is"):
        trim.status_read(item["status"], trim.status_limit(2, 3))


def test_a_dense_record_comes_without_its_managed_fields_parsed() -> None:
    """The API server lists in metadata.managedFields each field a writer set: 0.5 MB of
    `{"k1":{"a":0},...}` written to a status is 0.65 MB of fieldsV1, parsed whole beside the
    lifted status (12.3 MiB at its peak). kube._decoder lifts them with the record's spec and
    status; trim.meta never keeps them."""
    from flatjob.runtime import kube
    from flatjob.runtime.sim.apiserver import managedfields

    old: dict[str, Any] = {"apiVersion": "flatjob.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "j"}, "spec": {}, "status": {}}
    new = {**old, "metadata": {"name": "j"}, "status": {f"k{i}": {"a": 0} for i in range(30_000)}}
    new["metadata"]["managedFields"] = managedfields.record(old, new, "tenant", "status", "2026-01-01T00:00:00Z", "flatjob.dev/v1beta1")
    raw = json.dumps({"type": "MODIFIED", "object": new}, separators=(",", ":")).encode()
    tracemalloc.start()
    got = kube._decoder(trim.RECORD_LIFT, 2)(raw)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(got["object"]["metadata"]["managedFields"], bytes) and peak < 2 * len(raw)
    assert trim.record(got["object"])["metadata"] == {"name": "j"}
