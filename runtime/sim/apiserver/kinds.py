"""Every resource the fake serves: its group, version, names, verbs, subresources and strategy.

One table, read by the store (what to do on a write), the HTTP server (which URLs exist) and
discovery (what `/api/v1` and `/apis/<group>/<version>` list).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ...api import Obj
from . import events
from .customresources import PODGROUP, Crd, CustomResourceStrategy, defaulted, shipped
from .deployments import DeploymentStrategy
from .leases import LeaseStrategy
from .pods import PodStrategy
from .podtemplates import PodTemplateStrategy
from .quota import ResourceQuotaStrategy
from .secrets import SecretStrategy
from .strategy import Strategy

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    """One served resource (`pods`, `leases.coordination.k8s.io`, ...)."""

    key: str  # the store's key for its objects
    group: str
    version: str
    plural: str
    kind: str
    singular: str
    strategy: Strategy = field(compare=False)
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    custom: bool = False  # a custom resource (unstructured: list items keep apiVersion and kind)
    to_storage: Callable[[Obj], Obj] | None = field(default=None, compare=False)
    from_storage: Callable[[Obj], Obj] | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _custom(crd: Crd, key: str) -> Resource:
    subs = tuple(s for s, on in (("status", crd.status), ("scale", crd.scale is not None)) if on)
    return Resource(key, crd.group, crd.version, crd.plural, crd.kind, crd.singular, CustomResourceStrategy(crd), subs, short_names=crd.short_names, custom=True,
                    from_storage=functools.partial(defaulted, schema=crd.schema))


@functools.lru_cache(maxsize=1)
def resources() -> tuple[Resource, ...]:
    builtin = (
        Resource("pods", "", "v1", "pods", "Pod", "pod", PodStrategy(), ("status", "binding"), short_names=("po",)),
        Resource("podtemplates", "", "v1", "podtemplates", "PodTemplate", "podtemplate", PodTemplateStrategy()),
        Resource("secrets", "", "v1", "secrets", "Secret", "secret", SecretStrategy()),
        Resource("events", "", "v1", "events", "Event", "event", events.EventStrategy(), short_names=("ev",)),
        Resource("resourcequotas", "", "v1", "resourcequotas", "ResourceQuota", "resourcequota", ResourceQuotaStrategy(), ("status",), short_names=("quota",)),
        Resource("events", "events.k8s.io", "v1", "events", "Event", "event", events.EventV1Strategy(), short_names=("ev",), to_storage=events.to_core, from_storage=events.from_core),
        Resource("leases", "coordination.k8s.io", "v1", "leases", "Lease", "lease", LeaseStrategy()),
        Resource("deployments", "apps", "v1", "deployments", "Deployment", "deployment", DeploymentStrategy(), ("status",), short_names=("deploy",)),
    )
    records = tuple(_custom(crd, f"records/{crd.plural}") for crd in shipped())
    return (*builtin, _custom(PODGROUP, "podgroups"), *records)


@functools.lru_cache(maxsize=1)
def _by_path() -> dict[tuple[str, str, str], Resource]:
    return {(r.group, r.version, r.plural): r for r in resources()}


def by_path(group: str, version: str, plural: str) -> Resource | None:
    """The resource served at /api(s)/<group>/<version>/.../<plural>."""
    return _by_path().get((group, version, plural))


def by_key(key: str) -> Resource:
    """The resource whose objects the store keeps under `key` (the first one that serves it)."""
    return next(r for r in resources() if r.key == key)


def by_kind(api_version: str, kind: str) -> Resource | None:
    """The resource of an object's apiVersion and kind (owner references, `apply`)."""
    return next((r for r in resources() if r.api_version == api_version and r.kind == kind), None)


def record(plural: str) -> Resource:
    """One of the job records (flatjob.dev/v1beta1)."""
    return by_key(f"records/{plural}")
