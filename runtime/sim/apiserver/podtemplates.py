"""PodTemplates: pkg/registry/core/podtemplate/strategy.go.

The template's pod spec gets the pod defaults (not the pod admission plugins: no service
account volume, no default tolerations), its quantities are stored canonically, it is
validated like a pod's spec, it may change freely, and generation is 1 on create and grows
with every change of `template`.
"""

from __future__ import annotations

from typing import Any

from ...api import Obj
from . import defaults, pods
from .status import FieldError
from .strategy import Strategy
from .typed import quantities_in

TEMPLATE = "io.k8s.api.core.v1.PodTemplateSpec"


class PodTemplateStrategy(Strategy):
    generation = True

    def decode(self, body: Obj, kind: str, strict: bool) -> tuple[Obj, list[str]]:
        if isinstance(body.get("template"), dict):
            body = {**body, "template": quantities_in(body["template"], TEMPLATE)}
        return body, []

    def default(self, obj: Obj) -> None:
        template = obj.setdefault("template", {})
        defaults.pod_spec(template.setdefault("spec", {}))

    def validate_create(self, obj: Obj) -> list[FieldError]:
        errs = pods.validate_spec({"spec": obj["template"]["spec"]})  # ValidatePodTemplateSpec: no pod-create rule (nodeName beside gates)
        return [FieldError(e.type, "template." + e.field, e.value, e.detail, e.shown) for e in errs]

    def validate_update(self, obj: Obj, old: Obj) -> list[FieldError]:
        return self.validate_create(obj)

    def spec_of(self, obj: Obj) -> Any:
        return obj.get("template")
