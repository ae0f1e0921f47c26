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
