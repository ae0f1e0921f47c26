"""The Kubernetes API as the runtime sees it: resources, errors, and the Cluster interface.

runtime.kube implements Cluster over HTTP (the only module that imports `kubernetes`); tests
run it against runtime.sim.server, a fake kube-apiserver.  Objects are plain dicts in the
API's JSON shape.  Errors carry the API's HTTP status and reason; a server that cannot be
reached is an ApiError too (status 0), so one `except ApiError` covers every failure.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """A namespaced API resource: its group (empty for core), version and plural."""

    group: str
    version: str
    plural: str


PODS = Resource("", "v1", "pods")
POD_TEMPLATES = Resource("", "v1", "podtemplates")
SECRETS = Resource("", "v1", "secrets")
EVENTS = Resource("", "v1", "events")
LEASES = Resource("coordination.k8s.io", "v1", "leases")
PODGROUPS = Resource("scheduler.tensorstack.dev", "v1beta1", "podgroups")
DEPLOYMENTS = Resource("apps", "v1", "deployments")


def record_resource(plural: str) -> Resource:
    """The job record's resource (flatjob.dev/v1beta1, one plural per kind)."""
    return Resource("flatjob.dev", "v1beta1", plural)


class ApiError(Exception):
    """An API error with its HTTP status and reason."""

    status = 500
    reason = "InternalError"

    retry_after: float | None = None  # seconds the server asked the client to wait (Retry-After)

    def __init__(self, message: str = "", status: int | None = None, reason: str | None = None, retry_after: float | None = None):
        super().__init__(message or self.reason)
        if status is not None:
            self.status = status
        if reason is not None:
            self.reason = reason
        if retry_after is not None:
            self.retry_after = retry_after


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


class Forbidden(ApiError):
    """403: RBAC, or an admission plugin such as ResourceQuota refused the request."""

    status, reason = 403, "Forbidden"


class TooLarge(ApiError):
    """413: the request body is over the API server's limit."""

    status, reason = 413, "RequestEntityTooLarge"


class Unreachable(ApiError):
    """No answer: connection refused or reset, a time-out, TLS failure."""

    status, reason = 0, "Unreachable"


class Watch(Protocol):
    """A watch stream: events since a resourceVersion."""

    def next_events(self, timeout: float | None) -> list[tuple[str, Obj]]:
        """Events that arrived (ADDED/MODIFIED/DELETED/BOOKMARK); [] after `timeout` seconds.
        Raises Expired when the resourceVersion is too old, ApiError when the stream ended."""
        ...

    def close(self) -> None: ...


Trim = Callable[[Obj], Obj]
# Members of a dense answer's objects left unparsed (runtime.sieve): named, or picked by (depth, key).
Lift = Collection[str] | Callable[[int, bytes], bool]


class Cluster(Protocol):
    """Everything the runtime asks of the API server."""

    # `lift`: members of each object left unparsed, as bytes, when the answer is dense (runtime.sieve)
    def list(self, res: Resource, namespace: str, *, labels: Mapping[str, str] | None = None, fields: Mapping[str, str] | None = None, trim: Trim = ..., lift: Lift = ...) -> tuple[list[Obj], str]: ...
    def watch(self, res: Resource, namespace: str, resource_version: str, *, labels: Mapping[str, str] | None = None, fields: Mapping[str, str] | None = None, trim: Trim = ..., lift: Lift = ...) -> Watch: ...
    # `trim`: what of the answer to keep, taken as it is parsed (a dense one under nesting.DENSE)
    def get(self, res: Resource, namespace: str, name: str, *, trim: Trim = ...) -> Obj: ...
    def create(self, res: Resource, namespace: str, body: Obj, *, trim: Trim = ...) -> Obj: ...
    def replace(self, res: Resource, namespace: str, body: Obj, sub: str | None = None, *, trim: Trim = ..., lift: Lift = ...) -> Obj: ...
    def patch(self, res: Resource, namespace: str, name: str, ops: list[Obj], *, trim: Trim = ...) -> Obj: ...
    def delete(self, res: Resource, namespace: str, name: str, uid: str | None = None) -> None: ...
