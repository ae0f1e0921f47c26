"""Argo CD pieces for flatjob's job records: the Lua health check, argocd-cm, Applications.

One source for what overlays/argocd/ ships and what `flatjob init --gitops argocd` writes
(tests/test_argocd.py keeps the files in step and runs the Lua in a real Lua runtime).
Git holds PodTemplates, never pods (docs/architecture.md §4), so the only field git states
that changes in the cluster is an elastic record's expectedReplicas (`kubectl scale`): it is
ignored in diffs, and RespectIgnoreDifferences keeps syncs off it.
"""

from __future__ import annotations

from typing import Any

from . import keys
from .emit import dump

RECORD_KINDS = ("GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob")
ELASTIC_KINDS = ("PyTorchTrainingJob", "DeepSpeedJob")
PLUGIN = "flatjob"

HEALTH_LUA = """\
-- Argo CD health of flatjob's job records (group flatjob.dev: GenericJob, PyTorchTrainingJob,
-- DeepSpeedJob, ColossalAIJob).  The runtime writes status.phase and T9k's conditions;
-- this maps the phase to a health status and shows the message of the condition that explains it.
-- The record follows kstatus (observedGeneration, Ready/Reconciling/Stalled), so a status written
-- for an older generation is reported as Progressing until the runtime catches up, and
-- Stalled=True (failed, or a record the runtime refuses) is Degraded.  A restart in progress
-- is Progressing with what restarts and why: the job may still succeed (docs/gitops.md).
-- Before the runtime writes, the CRD's default status says it waits for the runtime.
-- Plain Lua 5.1 and no standard libraries (Argo CD runs health checks without them).

local HEALTH = {
  Pending = "Progressing",
  Running = "Progressing",
  Resuming = "Progressing",
  Paused = "Suspended",
  Succeeded = "Healthy",
  Failed = "Degraded",
  Unknown = "Progressing",
}

-- The conditions whose message explains each phase, most telling first.
local MESSAGE_FROM = {
  Pending = {"Reconciling", "Initialized", "Running"},
  Running = {"Running"},
  Resuming = {"Reconciling", "Running"},
  Paused = {"Paused"},
  Succeeded = {"Completed"},
  Failed = {"Failed", "Stalled"},
  Unknown = {"Reconciling", "Running"},
}

local function find(conditions, wanted)
  for _, c in ipairs(conditions) do
    if c.type == wanted then
      return c
    end
  end
  return nil
end

local function said(c)
  if c ~= nil and c.message ~= nil and c.message ~= "" and c.message ~= "-" then
    return c.message
  end
  return nil
end

local function condition_message(conditions, types)
  for _, wanted in ipairs(types) do
    local text = said(find(conditions, wanted))
    if text ~= nil then
      return text
    end
  end
  return nil
end

local hs = {status = "Progressing", message = "Waiting for the flatjob runtime to report status"}
if obj.status == nil then
  return hs
end
local conditions = obj.status.conditions or {}

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.message = "Waiting for the flatjob runtime to observe generation " .. tostring(generation)
  return hs
end

local stalled = find(conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = condition_message(conditions, {"Failed", "Stalled"}) or "The job has failed"
  if stalled.reason ~= nil and stalled.reason ~= "" and stalled.reason ~= "Failed" and stalled.reason ~= "-" then
    hs.message = stalled.reason .. ": " .. hs.message
  end
  return hs
end

local phase = obj.status.phase
if phase == nil then
  hs.message = said(find(conditions, "Reconciling")) or hs.message
  return hs
end
local health = HEALTH[phase]
if health == nil then
  hs.message = "Unknown phase " .. tostring(phase)
  return hs
end
hs.status = health
hs.message = condition_message(conditions, MESSAGE_FROM[phase]) or phase
return hs
"""

# ignoreDifferences entries: (group, kind, JSON pointer, why)
# Pods are not in git (the runtime creates them from PodTemplates), so only the elastic
# records' expectedReplicas, which `kubectl scale` or an autoscaler changes, is ignored.
IGNORED: tuple[tuple[str, str, str], ...] = tuple((keys.RECORD_GROUP, kind, "/spec/elastic/expectedReplicas") for kind in ELASTIC_KINDS)
SYNC_OPTIONS = ("ServerSideApply=true", "RespectIgnoreDifferences=true", "CreateNamespace=true")


def _group_kind(group: str, kind: str) -> str:
    """argocd-cm's key form: <group>_<kind>, or just <kind> for the core group."""
    return f"{group}_{kind}" if group else kind


def argocd_cm_data() -> dict[str, str]:
    """argocd-cm entries: the health check per record kind and the ignored differences."""
    data = {f"resource.customizations.health.{keys.RECORD_GROUP}_{kind}": HEALTH_LUA for kind in RECORD_KINDS}
    for group, kind, pointer in IGNORED:
        data[f"resource.customizations.ignoreDifferences.{_group_kind(group, kind)}"] = f"jsonPointers:\n  - {pointer}\n"
    return data


def argocd_cm() -> dict[str, Any]:
    """A strategic-merge patch of argocd-cm (no namespace: it matches wherever Argo CD lives)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm"}, "data": argocd_cm_data()}


def ignore_differences() -> list[dict[str, Any]]:
    """The Application's spec.ignoreDifferences."""
    return [{**({"group": g} if g else {}), "kind": k, "jsonPointers": [p]} for g, k, p in IGNORED]


def application(name: str, repo_url: str, path: str, namespace: str, plugin_env: dict[str, str] | None = None, revision: str = "HEAD") -> dict[str, Any]:
    """An Application syncing one environment: rendered output, or job specs through the plugin."""
    source: dict[str, Any] = {"repoURL": repo_url, "targetRevision": revision, "path": path}
    if plugin_env is not None:
        source["plugin"] = {"name": PLUGIN, "env": [{"name": k, "value": v} for k, v in plugin_env.items()]}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": source,
            "destination": {"server": "https://kubernetes.default.svc", "namespace": namespace},
            "ignoreDifferences": ignore_differences(),
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, "syncOptions": list(SYNC_OPTIONS)},
        },
    }


def yaml_file(header: str, doc: Any) -> str:
    """A YAML file: comment lines, then the document."""
    return "".join(f"# {line}\n" if line else "#\n" for line in header.strip("\n").split("\n")) + dump(doc)
