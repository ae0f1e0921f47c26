"""Events are aggregated as client-go's recorder does (runtime/events.py): one write per
(type, reason) per WINDOW, repeats patch the count, differing messages are combined."""

from __future__ import annotations

from flatjob.runtime.events import COMBINED, WINDOW, EventRecorder

RECORD = {"apiVersion": "flatjob.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "j", "uid": "u"}}


def test_the_first_occurrence_is_written_at_once_then_one_write_per_window() -> None:
    r = EventRecorder("ns")
    r.record("Warning", "Restarting", "w-0 failed", 100.0)
    (create,) = r.due(RECORD, 100.0)
    assert create.body is not None and create.body["count"] == 1 and create.body["message"] == "w-0 failed"
    assert create.body["involvedObject"] == {"apiVersion": "flatjob.dev/v1beta1", "kind": "GenericJob", "name": "j", "namespace": "ns", "uid": "u"}
    r.done(create, 100.0, "j.abcde")
    for i in range(1, 1000):  # a 1000-pod job failing at once
        r.record("Warning", "Restarting", f"w-{i} failed", 100.0 + i / 1000)
    assert r.due(RECORD, 105.0) == [] and r.pending(105.0) == 100.0 + WINDOW
    (patch,) = r.due(RECORD, 110.0)
    assert patch.name == "j.abcde" and {op["path"]: op["value"] for op in patch.ops} == {
        "/count": 1000, "/lastTimestamp": "1970-01-01T00:01:40Z", "/message": COMBINED + "w-999 failed"}
    r.done(patch, 110.0)
    assert r.pending(110.0) is None


def test_reasons_are_written_on_their_own_and_a_lost_event_is_created_again() -> None:
    r = EventRecorder("ns")
    r.record("Warning", "Restarting", "a", 0.0)
    r.record("Normal", "Released", "b", 0.0)
    writes = r.due(RECORD, 0.0)
    assert sorted(w.key for w in writes) == [("Normal", "Released"), ("Warning", "Restarting")]
    for w in writes:
        r.done(w, 0.0, f"e-{w.key[1]}")
    r.record("Warning", "Restarting", "a", 20.0)
    (w,) = r.due(RECORD, 20.0)
    assert w.name == "e-Restarting" and {op["path"]: op["value"] for op in w.ops}["/message"] == "a"  # the same message: not combined
    r.lost(w)  # the Event expired meanwhile (its TTL)
    (again,) = r.due(RECORD, 20.0)
    assert again.body is not None and again.body["count"] == 1
