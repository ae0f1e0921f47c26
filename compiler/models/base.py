"""The base every T9k model derives from: strict, closed, camelCase on the wire."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class T9kModel(BaseModel):
    """A T9k API type: unknown fields are errors and no value is coerced.

    Strict mode mirrors the API server: `replicas: "4"` is rejected there (the CRD says
    integer), so it is rejected here, at the line, before the pull request merges.
    """

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
    )

    def wire(self) -> dict[str, Any]:
        """Dump as the API would store it: camelCase keys, unset optional fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# A raw Kubernetes object embedded in a T9k type (pod template, env var, resources...).
# It is checked separately against the pinned Kubernetes OpenAPI schema (compiler.kube),
# which knows far more than a hand-written model would.
KubeObject = dict[str, Any]

NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
