"""Leases (coordination.k8s.io/v1): pkg/apis/coordination/validation ValidateLeaseSpec —
leaseDurationSeconds and leaseTransitions must not be negative, and the duration not zero."""

from __future__ import annotations

from ...api import Obj
from .status import FieldError, invalid_field
from .strategy import Strategy


class LeaseStrategy(Strategy):
    typed = "io.k8s.api.coordination.v1.Lease"

    def validate_create(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = []
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and duration <= 0:
            errs.append(invalid_field("spec.leaseDurationSeconds", duration, "must be greater than 0"))
        transitions = spec.get("leaseTransitions")
        if transitions is not None and transitions < 0:
            errs.append(invalid_field("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
        return errs

    def validate_update(self, obj: Obj, old: Obj) -> list[FieldError]:
        return self.validate_create(obj)
