"""The base every T9k model derives from: strict, closed, camelCase on the wire."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from ..digits import INT32_MAX, INT64_MAX


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


KUBERNETES_SCHEMA_URL = "https://raw.githubusercontent.com/yannh/kubernetes-json-schema/master/v1.32.0-standalone-strict"


def kube(definition: str, schema_file: str) -> Any:
    """A raw Kubernetes object embedded in a T9k type (pod template, env var, resources...).

    It is checked separately against the pinned Kubernetes OpenAPI schema (compiler.kube),
    which knows far more than a hand-written model would; editors get the same schema
    through the $ref in the generated JSON Schema.
    """
    schema = {"$ref": f"{KUBERNETES_SCHEMA_URL}/{schema_file}", "description": f"Kubernetes {definition.rsplit('.', 1)[-1]}."}
    return Annotated[dict[str, Any], WithJsonSchema(schema)]


PodTemplate = kube("io.k8s.api.core.v1.PodTemplateSpec", "podtemplatespec-v1.json")
EnvVar = kube("io.k8s.api.core.v1.EnvVar", "envvar-v1.json")
Resources = kube("io.k8s.api.core.v1.ResourceRequirements", "resourcerequirements-v1.json")
ServicePort = kube("io.k8s.api.core.v1.ServicePort", "serviceport-v1.json")

# Every integer of a T9k type is bounded here, once: T9k's CRD and the launchers hold replicas,
# slots, processes, restarts and limits in a Go int32 (activeDeadlineSeconds: an int64, as in
# a Kubernetes Job), so `slotsPerWorker: 9223372036854775808` is refused at its line, not by
# the API server or as a launcher's overflow (hx17).  tests/test_jobtypes.py checks that no
# model field reads an unbounded int.
Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
NonNegInt = Annotated[int, Field(ge=0, le=INT32_MAX)]
PosInt = Annotated[int, Field(ge=1, le=INT32_MAX)]
PosInt64 = Annotated[int, Field(ge=1, le=INT64_MAX)]
