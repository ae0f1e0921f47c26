"""DeepSpeedJob: every replica runs sshd; worker-0 runs `deepspeed` over the hostfile."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import NonNegInt, PodTemplate, PosInt, T9kModel
from .common import (
    ElasticConfig,
    RestartPolicyName,
    RunMode,
    RunPolicy,
    SchedulePolicy,
    SSHConfig,
    T9kJob,
)


class RunType(T9kModel):
    """What deepspeed runs on every slot: exactly one of python, module or exec."""

    python: list[str] | None = Field(None, description="Python script and its args.")
    module: list[str] | None = Field(None, description="Python module and its args (deepspeed --module).")
    exec: list[str] | None = Field(None, description="Executable and its args (deepspeed --no_python).")


class DeepSpeedConfig(T9kModel):
    """How the deepspeed launcher is invoked."""

    run: RunType | None = Field(None, description="The program to run; required unless customCommand is set.")
    slots_per_worker: PosInt = Field(1, description="Processes per replica (hostfile slots), usually its GPU count.")
    local_rank: bool = Field(True, description="Pass --local_rank to the program (false adds --no_local_rank).")
    autotune: Literal["none", "tune", "run"] = Field("none", description="DeepSpeed autotuning: none, tune (find the best config) or run (find it and train).")
    other_args: list[str] = Field(default_factory=list, description="More deepspeed launcher arguments, placed before the program.")
    custom_command: str | None = Field(None, description="A shell command run on worker-0 instead of the generated deepspeed command; the hostfile is still provided.")


class DeepSpeedWorker(T9kModel):
    """The DeepSpeedJob's replicas; worker-0 launches, all run sshd."""

    replicas: NonNegInt = Field(1, description="Number of worker pods.")
    restart_policy: RestartPolicyName = Field("OnFailure", description="Never, OnFailure, Always or ExitCode.")
    template: PodTemplate = Field(description="Kubernetes PodTemplateSpec; the container named 'worker' (else the first) trains.")


class DeepSpeedJobSpec(T9kModel):
    """Desired state of a DeepSpeedJob."""

    worker: DeepSpeedWorker = Field(description="The worker replicas.")
    config: DeepSpeedConfig = Field(description="The deepspeed launch.")
    disable_custom_env: bool = Field(False, description="Do not forward the container's env to other workers through /root/.deepspeed_env.")
    elastic: ElasticConfig | None = Field(None, description="Elastic training (deepspeed --elastic_training).")
    ssh: SSHConfig = Field(default_factory=SSHConfig, description="SSH key mount path and sshd location (flatjob extension; T9k fixes these).")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Deadline, backoff limit and clean-up.")
    run_mode: RunMode | None = Field(None, description="Debug or pause mode.")
    scheduler: SchedulePolicy | None = Field(None, description="Scheduler choice; unset means kube-scheduler.")


class DeepSpeedJob(T9kJob):
    """A DeepSpeed training job."""

    kind: Literal["DeepSpeedJob"]
    spec: DeepSpeedJobSpec
