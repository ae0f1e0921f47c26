"""What differs between resources: the generic registry's behaviour and its per-kind hooks.

A Strategy is the fake's counterpart of a registry strategy (k8s.io/apiserver/pkg/registry/rest:
RESTCreateStrategy, RESTUpdateStrategy, RESTDeleteStrategy): the defaults here are the generic
registry's (generic/registry/store.go, rest/create.go, rest/update.go), and each resource module
(pods, customresources, others) overrides what its own strategy.go does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...api import Obj
from .copies import clone
from .status import FieldError

if TYPE_CHECKING:
    from .store import Store

META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass
class Context:
    """What a hook may read: the time, the store (under its lock) and a seeded random source."""

    store: Store
    now: float
    stamp: str
    rng: random.Random
    warnings: list[str] = field(default_factory=list)


class Strategy:
    """The generic registry's behaviour; resource modules override the hooks they need."""

    status_subresource = False  # main writes keep status, status writes keep everything else
    unconditional_update = True  # an update without metadata.resourceVersion is allowed
    generation = False  # metadata.generation is 1 on create and grows when the spec changes
    typed: str | None = None  # the OpenAPI definition bodies are decoded into (built-in kinds)
    field_labels = META_FIELDS
    strategic_merge = True  # built-in kinds accept strategic merge patches

    def decode(self, body: Obj, kind: str, strict: bool) -> tuple[Obj, list[str]]:
        """The body after the JSON decoder (typed kinds drop unknown fields)."""
        if self.typed is None:
            return body, []
        from .typed import decode

        return decode(self.typed, kind, body, strict)

    def default(self, obj: Obj) -> None:
        """SetDefaults_* (run on every decode: create, update and patch)."""

    def admit(self, obj: Obj, ctx: Context) -> None:
        """Mutating admission on create."""

    def prepare_create(self, obj: Obj, ctx: Context) -> None:
        """PrepareForCreate."""

    def validate_create(self, obj: Obj) -> list[FieldError]:
        return []

    def check_create(self, obj: Obj, ctx: Context) -> None:
        """Validating admission on create (ResourceQuota); raises to refuse."""

    def prepare_update(self, obj: Obj, old: Obj, ctx: Context) -> None:
        """PrepareForUpdate of the main resource."""

    def validate_update(self, obj: Obj, old: Obj) -> list[FieldError]:
        return []

    def prepare_status(self, obj: Obj, old: Obj) -> None:
        """PrepareForUpdate of the status subresource: only status changes."""
        status = obj.get("status")
        obj.clear()
        obj.update(clone({k: v for k, v in old.items() if k != "status"}))  # stored objects are never shared
        if status is not None:
            obj["status"] = status

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        return []

    def grace_period(self, obj: Obj, requested: int | None) -> int | None:
        """CheckGracefulDelete: the grace period, or None when deletion is immediate."""
        return None

    def fields(self, obj: Obj) -> dict[str, str]:
        meta = obj.get("metadata") or {}
        return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}

    def spec_of(self, obj: Obj) -> Any:
        """What a generation counts changes of: everything but metadata and status."""
        return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}

    def after_write(self, old: Obj | None, new: Obj | None, ctx: Context) -> None:
        """Bookkeeping other objects follow (quota usage, garbage collection)."""
