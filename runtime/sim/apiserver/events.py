"""Events: one storage served as core/v1 Event and as events.k8s.io/v1 Event.

kube-apiserver stores both versions as the internal core.Event (pkg/apis/events/v1/
conversion.go maps regarding/involvedObject, note/message, deprecatedCount/count, ...), so an
Event created through one API is listed by the other.  Validation is ValidateEventCreate
(pkg/apis/core/validation/events.go): events.k8s.io/v1 requires eventTime, reportingController,
reportingInstance, action and reason, a type of Normal or Warning, and no deprecated fields;
core/v1 only checks that involvedObject's namespace is the event's.
"""

from __future__ import annotations

from ...api import Obj
from .status import FieldError, invalid_field, required
from .strategy import Strategy

# events.k8s.io/v1 field -> core/v1 field
RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
BACK = {v: k for k, v in RENAMES.items()}
NOTE_LIMIT = 1024


def to_core(event: Obj) -> Obj:
    out = {RENAMES.get(k, k): v for k, v in event.items()}
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


def from_core(event: Obj) -> Obj:
    out = {BACK.get(k, k): v for k, v in event.items()}
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


class EventStrategy(Strategy):
    """core/v1 Events (and the storage of events.k8s.io/v1)."""

    strict_v1 = False

    def validate_create(self, obj: Obj) -> list[FieldError]:
        ns = obj["metadata"].get("namespace", "")
        involved = (obj.get("involvedObject") or {}).get("namespace", "")
        errs: list[FieldError] = []
        if not obj.get("eventTime"):
            if (involved or ns not in ("", "default")) and involved != ns:
                errs.append(invalid_field("involvedObject.namespace", involved, "does not match event.namespace"))
            return errs
        if not involved and ns not in ("default", "kube-system"):
            errs.append(invalid_field("involvedObject.namespace", involved, "does not match event.namespace"))
        controller = "reportingController" if self.strict_v1 else "reportingComponent"
        for path, key in ((controller, "reportingComponent"), ("reportingInstance", "reportingInstance"), ("action", "action"), ("reason", "reason")):
            if not obj.get(key):
                errs.append(required(path))
        if len(obj.get("message") or "") > NOTE_LIMIT:
            errs.append(invalid_field("message", "", f"can have at most {NOTE_LIMIT} characters"))
        return errs


class EventV1Strategy(EventStrategy):
    """events.k8s.io/v1: the strict validation of new-style Events."""

    strict_v1 = True

    def validate_create(self, obj: Obj) -> list[FieldError]:
        errs = [] if obj.get("eventTime") else [required("eventTime")]
        errs += super().validate_create(obj)
        if obj.get("type") not in ("Normal", "Warning"):
            errs.append(invalid_field("type", "", f"has invalid value: {obj.get('type') or ''}"))
        for key in ("firstTimestamp", "lastTimestamp"):
            if obj.get(key):
                errs.append(invalid_field(key, "", "needs to be unset"))
        if obj.get("count"):
            errs.append(invalid_field("count", "", "needs to be unset"))
        if any((obj.get("source") or {}).values()):
            errs.append(invalid_field("source", "", "needs to be unset"))
        return errs
