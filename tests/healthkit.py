"""How Argo CD and Flux judge a job record, with the real interpreters where they run here.

- `served(record)`: the record as the API server returns it: the CRD's defaults filled in
  (the fake API server's own defaulting, runtime/sim/apiserver/customresources.py), so a
  record no runtime has written reads the CRD's default status.
- `argocd(record)`: overlays/argocd/health.lua in a real Lua (lupa), with no standard
  libraries, as Argo CD runs it; {"status", "message"}.
- `flux_cel(record)`: the Kustomization's healthCheckExprs, evaluated by a real CEL
  implementation (cel-python) the way Flux does (fluxcd/pkg runtime/cel StatusEvaluator):
  status.observedGeneration against metadata.generation first, then inProgress, failed,
  current; none true is InProgress; an error is Unknown with the error (fluxcd/cli-utils
  errResourceToResourceStatus), which Flux reports until its timeout.  Flux evaluates the
  expressions unchecked over the object's own top-level fields, so cel-go resolves every
  top-level name an expression uses, inside has() too, and a name the object lacks is an
  error (cel-go absoluteAttribute.Resolve); cel-python answers has() false there, so that
  check is made here first.
- `kstatus(record)`: fluxcd/cli-utils pkg/kstatus/status Compute for a custom resource (what
  Flux uses for a kind without healthCheckExprs): deletionTimestamp, generation,
  Reconciling/Stalled in list order, then Ready, else Current.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest

from flatjob.compiler import flux
from flatjob.compiler.argocd import HEALTH_LUA
from flatjob.runtime.sim.apiserver.customresources import defaulted, shipped

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")


def served(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its CRD's defaults, as a GET returns it."""
    crd = next(c for c in shipped() if c.kind == record["kind"])
    return copy.deepcopy(defaulted(record, crd.schema))


def argocd(record: dict[str, Any]) -> dict[str, str]:
    lupa = pytest.importorskip("lupa")
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.execute("string, io, os, math, debug, utf8, coroutine, require, load, loadstring, dofile = nil")
    lua.globals().obj = lua.table_from(record, recursive=True)
    return dict(lua.execute(HEALTH_LUA))


@functools.cache
def _program(expr: str) -> tuple[Any, frozenset[str]]:
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    ast = env.compile(expr)
    names = frozenset(str(t.children[0]) for t in ast.find_data("ident")) & set(TOP_LEVEL)
    return env.program(ast), names


def _evaluate(expr: str, record: dict[str, Any]) -> bool:
    import celpy

    program, names = _program(expr)
    missing = sorted(n for n in names if n not in record)
    if missing:
        raise LookupError(f"no such attribute(s): {', '.join(missing)}")  # cel-go's resolution of an unbound name
    value = program.evaluate({k: celpy.json_to_cel(v) for k, v in record.items()})
    if isinstance(value, Exception):
        raise value
    if not isinstance(value, celpy.celtypes.BoolType):
        raise TypeError(f"failed to evaluate CEL expression as boolean: '{expr}'")
    return bool(value)


def flux_cel(record: dict[str, Any], exprs: dict[str, str] | None = None) -> str:
    """"InProgress", "Failed", "Current", or "Unknown: <error>"."""
    exprs = exprs or flux.HEALTH_EXPRS
    observed = (record.get("status") or {}).get("observedGeneration") if isinstance(record.get("status"), dict) else None
    generation = record.get("metadata", {}).get("generation")
    if isinstance(observed, int) and isinstance(generation, int) and observed != generation:
        return "InProgress"
    for key, result in (("inProgress", "InProgress"), ("failed", "Failed"), ("current", "Current")):
        if key not in exprs:
            continue
        try:
            if _evaluate(exprs[key], record):
                return result
        except Exception as exc:  # cel-python's own error types, and the unbound names above
            return f"Unknown: {exc}"
    return "InProgress"


def kstatus(record: dict[str, Any]) -> str:
    """InProgress, Failed, Current or Terminating."""
    if record.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    status = record.get("status") if isinstance(record.get("status"), dict) else {}
    generation = record.get("metadata", {}).get("generation")
    observed = status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed != generation:
        return "InProgress"
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    for c in conditions:
        if c.get("type") == "Reconciling" and c.get("status") == "True":
            return "InProgress"
        if c.get("type") == "Stalled" and c.get("status") == "True":
            return "Failed"
    for c in conditions:
        if c.get("type") == "Ready" and c.get("status") in ("True", "False", "Unknown"):
            return "Current" if c["status"] == "True" else "InProgress"
    return "Current"  # "the absence of any known conditions means the resource is current"
