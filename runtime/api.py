"""The handful of Kubernetes API calls the runtime makes, as an interface with two sides:
runtime.kube (the real API server, the only module that imports `kubernetes`) and
runtime.fake (an in-process fake for tests and simulations).

Objects are plain dicts in the API's JSON shape.  Errors are the API's status codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

Obj = dict[str, Any]


class ApiError(Exception):
    """An API error with its HTTP status and reason."""

    status = 500
    reason = "InternalError"

    def __init__(self, message: str = "", status: int | None = None, reason: str | None = None):
        super().__init__(message or self.reason)
        if status is not None:
            self.status = status
        if reason is not None:
            self.reason = reason


class NotFound(ApiError):
    status, reason = 404, "NotFound"


class Conflict(ApiError):
    """409: the object changed since it was read (stale resourceVersion or UID precondition)."""

    status, reason = 409, "Conflict"


class AlreadyExists(ApiError):
    status, reason = 409, "AlreadyExists"


class Expired(ApiError):
    """410: the watch's resourceVersion is too old; relist."""

    status, reason = 410, "Expired"


class Invalid(ApiError):
    """422: the change is not allowed (e.g. adding a scheduling gate to an existing pod)."""

    status, reason = 422, "Invalid"


class Watch(Protocol):
    """A watch stream: events since a resourceVersion."""

    def next_events(self, timeout: float | None) -> list[tuple[str, Obj]]:
        """Events that arrived (ADDED/MODIFIED/DELETED/BOOKMARK); [] after `timeout` seconds.
        Raises Expired when the resourceVersion is too old, ApiError when the stream broke."""
        ...

    def close(self) -> None: ...


class Cluster(Protocol):
    """Everything the runtime asks of the API server."""

    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> tuple[list[Obj], str]: ...
    def watch_pods(self, namespace: str, selector: Mapping[str, str], resource_version: str) -> Watch: ...
    def create_pod(self, namespace: str, body: Obj) -> Obj: ...
    def patch_pod(self, namespace: str, name: str, patch: Obj) -> Obj: ...
    def delete_pod(self, namespace: str, name: str, uid: str | None) -> None: ...

    def list_records(self, namespace: str, plural: str, name: str) -> tuple[list[Obj], str]: ...
    def watch_records(self, namespace: str, plural: str, name: str, resource_version: str) -> Watch: ...
    def replace_record_status(self, namespace: str, plural: str, body: Obj) -> Obj: ...

    def get_secret(self, namespace: str, name: str) -> Obj: ...
    def create_secret(self, namespace: str, body: Obj) -> Obj: ...
    def get_podgroup(self, namespace: str, name: str) -> Obj: ...
    def create_event(self, namespace: str, body: Obj) -> None: ...

    def get_lease(self, namespace: str, name: str) -> Obj: ...
    def create_lease(self, namespace: str, body: Obj) -> Obj: ...
    def replace_lease(self, namespace: str, body: Obj) -> Obj: ...
