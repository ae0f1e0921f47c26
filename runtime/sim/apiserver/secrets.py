"""Secrets: pkg/registry/core/secret/strategy.go and ValidateSecret / ValidateSecretUpdate.

`stringData` is merged into `data` (base64) and never stored (v1 conversion); `type` defaults
to Opaque; `data` must be base64 (a []byte field); a `kubernetes.io/ssh-auth` Secret needs
`ssh-privatekey`; the type cannot change, nor the data of an immutable Secret; at most 1 MiB.
"""

from __future__ import annotations

import base64
import binascii
import re

from ...api import Obj
from .status import FieldError, bad_request, forbidden_field, invalid_field, required
from .strategy import META_FIELDS, Strategy

MAX_SIZE = 1024 * 1024
_KEY = re.compile(r"[-._a-zA-Z0-9]+")
REQUIRED_KEYS = {"kubernetes.io/ssh-auth": "ssh-privatekey", "kubernetes.io/basic-auth": None, "kubernetes.io/tls": "tls.crt"}


class SecretStrategy(Strategy):
    typed = "io.k8s.api.core.v1.Secret"
    field_labels = META_FIELDS | {"type"}

    def decode(self, body: Obj, kind: str, strict: bool) -> tuple[Obj, list[str]]:
        obj, warnings = super().decode(body, kind, strict)
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(value or "", validate=True)
            except (binascii.Error, ValueError):
                raise bad_request(f"Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0 (data[{key}])") from None
        text = obj.pop("stringData", None) or {}
        if text:
            data = obj.setdefault("data", {})
            for key, value in text.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        return obj, warnings

    def default(self, obj: Obj) -> None:
        obj.setdefault("type", "Opaque")

    def validate_create(self, obj: Obj) -> list[FieldError]:
        errs = []
        data = obj.get("data") or {}
        for key in data:
            if not _KEY.fullmatch(key):
                errs.append(invalid_field(f"data[{key}]", key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"))
        needed = REQUIRED_KEYS.get(obj.get("type", ""))
        if needed and needed not in data:
            errs.append(required(f"data[{needed}]"))
        if sum(len(base64.b64decode(v or "")) for v in data.values()) > MAX_SIZE:
            errs.append(FieldError("TooMany", "data", None, f"must have at most {MAX_SIZE} bytes", shown=""))
        return errs

    def validate_update(self, obj: Obj, old: Obj) -> list[FieldError]:
        errs = self.validate_create(obj)
        if obj.get("type") != old.get("type"):
            errs.append(invalid_field("type", obj.get("type"), "field is immutable"))
        if old.get("immutable"):
            if obj.get("data") != old.get("data"):
                errs.append(forbidden_field("data", "field is immutable when `immutable` is set"))
            if not obj.get("immutable"):
                errs.append(forbidden_field("immutable", "field is immutable when `immutable` is set"))
        return errs

    def fields(self, obj: Obj) -> dict[str, str]:
        return {**super().fields(obj), "type": obj.get("type", "")}
