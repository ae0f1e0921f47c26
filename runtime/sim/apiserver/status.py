"""kube-apiserver's error bodies: `Status` objects and the field errors inside 422 Invalid.

The shapes follow k8s.io/apimachinery/pkg/api/errors/errors.go (NewNotFound, NewAlreadyExists,
NewConflict, NewInvalid, NewForbidden, NewResourceExpired, NewBadRequest,
NewGenericServerResponse) and pkg/util/validation/field/errors.go (ErrorBody).  Every error is
an instance of the matching runtime.api class (NotFound, Conflict...), so in-process callers
catch them exactly as they catch runtime.kube's, and carries the Status body the HTTP server
sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...api import AlreadyExists, ApiError, Conflict, Expired, Invalid, NotFound, Obj

_CLASSES: dict[tuple[int, str], type[ApiError]] = {
    (404, "NotFound"): NotFound,
    (409, "AlreadyExists"): AlreadyExists,
    (409, "Conflict"): Conflict,
    (410, "Expired"): Expired,
    (410, "Gone"): Expired,
    (422, "Invalid"): Invalid,
}

OPTIMISTIC_LOCK = "the object has been modified; please apply your changes to the latest version and try again"


def error(code: int, reason: str, message: str, details: Obj | None = None) -> ApiError:
    """An ApiError of the runtime.api class for (code, reason) carrying its Status body."""
    cls = _CLASSES.get((code, reason), ApiError)
    exc = cls(message, code, reason)
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    exc.body = body  # type: ignore[attr-defined]
    return exc


def body_of(exc: ApiError) -> Obj:
    """The Status body of an error (errors raised elsewhere get a generic one)."""
    return getattr(exc, "body", None) or error(exc.status, exc.reason, str(exc)).body  # type: ignore[attr-defined]


def qualified(group: str, name: str) -> str:
    """schema.GroupResource.String(): `pods`, `pytorchtrainingjobs.flatjob.dev`."""
    return f"{name}.{group}" if group else name


def _details(name: str, group: str, kind: str, **more: Any) -> Obj:
    out: Obj = {}
    if name:
        out["name"] = name
    if group:
        out["group"] = group
    if kind:
        out["kind"] = kind
    out.update({k: v for k, v in more.items() if v})
    return out


def not_found(group: str, resource: str, name: str) -> ApiError:
    return error(404, "NotFound", f"{qualified(group, resource)} {_q(name)} not found", _details(name, group, resource))


def already_exists(group: str, resource: str, name: str, deleting: bool = False) -> ApiError:
    message = f"{qualified(group, resource)} {_q(name)} already exists"
    if deleting:  # registry/store.go create(): the name is still held by an object being deleted
        message = f"object is being deleted: {message}"
    return error(409, "AlreadyExists", message, _details(name, group, resource))


def conflict(group: str, resource: str, name: str, why: str = OPTIMISTIC_LOCK) -> ApiError:
    message = f"Operation cannot be fulfilled on {qualified(group, resource)} {_q(name)}: {why}"
    return error(409, "Conflict", message, _details(name, group, resource))


def forbidden(group: str, resource: str, name: str, why: str) -> ApiError:
    subject = f"{qualified(group, resource)} {_q(name)}" if name else qualified(group, resource)
    return error(403, "Forbidden", f"{subject} is forbidden: {why}", _details(name, group, resource))


def expired(message: str) -> ApiError:
    return error(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return error(400, "BadRequest", message)


def not_acceptable_patch(accepted: str) -> ApiError:
    message = f"the body of the request was in an unknown format - accepted media types include: {accepted}"
    return error(415, "UnsupportedMediaType", message)


def too_large_body(limit: int) -> ApiError:
    """endpoints/handlers/rest.go limitedReadBody: the request body is over MaxRequestBodyBytes."""
    return error(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def etcd_too_large() -> ApiError:
    """etcd refuses a request over --max-request-bytes; kube-apiserver passes the gRPC error on
    as an unknown error, a 500 without a reason (responsewriters/status.go ErrorToAPIStatus)."""
    return error(500, "", "etcdserver: request is too large")


def method_not_allowed(verb: str, what: str) -> ApiError:
    return error(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({verb} {what})")


def unprocessable_patch() -> ApiError:
    """A JSON patch that cannot be applied (a failed `test` included): NewGenericServerResponse(422)
    keeps only its generic message; the patch library's error is not passed on."""
    return error(422, "Invalid", "the server rejected our request due to an error in our request", {})


def timeout(message: str, retry: int = 1) -> ApiError:
    return error(504, "Timeout", message, {"retryAfterSeconds": retry})


# --- field errors (422 Invalid) ----------------------------------------------------------------

_TYPES = {
    "Required": ("Required value", "FieldValueRequired"),
    "Forbidden": ("Forbidden", "FieldValueForbidden"),
    "Invalid": ("Invalid value", "FieldValueInvalid"),
    "NotSupported": ("Unsupported value", "FieldValueNotSupported"),
    "Duplicate": ("Duplicate value", "FieldValueDuplicate"),
    "TooMany": ("Too many", "FieldValueTooMany"),
}
_VALUELESS = ("Required", "Forbidden")


@dataclass(frozen=True)
class FieldError:
    """One entry of a field.ErrorList: its type, path, bad value and detail."""

    type: str
    field: str
    value: Any = None
    detail: str = ""
    shown: str | None = None  # the value as Go prints it, when %v of the Python value differs

    def body(self) -> str:
        """field.Error.ErrorBody()."""
        text = _TYPES[self.type][0]
        if self.type not in _VALUELESS:
            text += ": " + (self.shown if self.shown is not None else go_value(self.value))
        if self.detail:
            text += ": " + self.detail
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def go_value(value: Any) -> str:
    """How field.Error prints a bad value: simple types with %v, strings quoted, nil as "null"."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return format_number(value)
    if isinstance(value, str):
        return _q(value)
    return _q(str(value))


def format_number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("Required", path, None, detail)


def forbidden_field(path: str, detail: str) -> FieldError:
    return FieldError("Forbidden", path, None, detail)


def invalid_field(path: str, value: Any, detail: str, shown: str | None = None) -> FieldError:
    return FieldError("Invalid", path, value, detail, shown)


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    return FieldError("NotSupported", path, value, "supported values: " + ", ".join(_q(s) for s in supported))


def invalid(group: str, kind: str, name: str, errors: list[FieldError]) -> ApiError:
    """NewInvalid: `Kind.group "name" is invalid: <error>` or `[<error>, <error>]` for several."""
    listed = [str(e) for e in errors]
    text = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    causes = [{"reason": _TYPES[e.type][1], "message": e.body(), "field": e.field} for e in errors]
    message = f"{qualified(group, kind)} {_q(name)} is invalid: {text}"
    return error(422, "Invalid", message, _details(name, group, kind, causes=causes))


def _q(text: str) -> str:
    """Go's %q for the strings the API puts in messages (names, paths, values)."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
