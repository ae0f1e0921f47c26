"""JSON Schemas of the four job kinds, generated from the models for editors and other tools."""

from __future__ import annotations

import json
from typing import Any

from .models import MODELS

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
BASE_URL = "https://raw.githubusercontent.com/flatjob/flatjob/main/schemas/jobs"


def job_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind, as editors (yaml-language-server) consume it."""
    schema = MODELS[kind].model_json_schema(by_alias=True, mode="validation")
    return {"$schema": SCHEMA_DIALECT, "$id": f"{BASE_URL}/{kind.lower()}.json", **schema}


def job_schema_files() -> dict[str, str]:
    """Relative path under schemas/ -> file text, for every kind; deterministic."""
    return {f"jobs/{kind.lower()}.json": json.dumps(job_schema(kind), indent=2, sort_keys=True, ensure_ascii=False) + "\n" for kind in sorted(MODELS)}
