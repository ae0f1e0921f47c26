"""ColossalAIJob in both documented shapes; normalize maps both onto the replicaSpecs shape.

Older shape (user manuals): spec.launcher + spec.worker{command, procPerWorker, torchArgs}.
Newer shape (User Console manual): spec.torchConfig + spec.replicaSpecs[type launcher|worker].
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import EnvVar, NonNegInt, PodTemplate, PosInt, Resources, T9kModel
from .common import ReplicaRestartPolicy, RunMode, SchedulePolicy, SSHConfig, T9kJob


class ColossalAILauncher(T9kModel):
    """Older shape: the launcher container, which runs `colossalai run`."""

    image: str | None = Field(None, description="Launcher image; default: the worker container's image.")
    working_dir: str | None = Field(None, description="Working directory; workers cd here before running the script.")
    env: list[EnvVar] = Field(default_factory=list, description="Kubernetes EnvVars of the launcher.")
    resources: Resources | None = Field(None, description="Kubernetes ResourceRequirements of the launcher.")


class ColossalAIWorker(T9kModel):
    """Older shape: the workers, which run sshd and receive the training command."""

    replicas: NonNegInt = Field(1, description="Number of worker pods.")
    proc_per_worker: PosInt = Field(1, description="Processes per worker (colossalai run --nproc_per_node).")
    command: list[str] = Field(description="Training script and its args.")
    torch_args: list[str] = Field(default_factory=list, description="Extra options for the torchrun that colossalai run starts.")
    template: PodTemplate = Field(description="Kubernetes PodTemplateSpec; needs a container named 'worker'.")


class TorchConfig(T9kModel):
    """Newer shape: what `colossalai run` starts on every worker."""

    proc_per_worker: PosInt = Field(1, description="Processes per worker (colossalai run --nproc_per_node).")
    script: list[str] = Field(description="Training script and its args.")
    extra_args: list[str] = Field(default_factory=list, description="Extra options for the torchrun that colossalai run starts.")


class ColossalAIReplicaSpec(T9kModel):
    """Newer shape: the launcher or the workers."""

    type: Literal["launcher", "worker"] = Field(description="launcher (exactly one pod) or worker.")
    replicas: NonNegInt = Field(1, description="Number of pods; the launcher always has one.")
    restart_policy: ReplicaRestartPolicy | None = Field(
        None, description="Accepted for T9k compatibility and ignored: a restarted pod cannot re-join `colossalai run`, so no ColossalAI pod is restarted (lint warns, FJ320)."
    )
    template: PodTemplate = Field(description="Kubernetes PodTemplateSpec.")


class ColossalAIRunPolicy(T9kModel):
    """What happens after a ColossalAIJob finishes."""

    clean_up_workers: bool = Field(False, description="Delete the workers when the job finishes; the launcher is kept for its logs.")


class ColossalAIJobSpec(T9kModel):
    """Desired state of a ColossalAIJob (either shape)."""

    ssh: SSHConfig = Field(default_factory=SSHConfig, description="SSH key mount path and sshd location.")
    launcher: ColossalAILauncher | None = Field(None, description="Older shape: the launcher.")
    worker: ColossalAIWorker | None = Field(None, description="Older shape: the workers.")
    torch_config: TorchConfig | None = Field(None, description="Newer shape: the script and process count.")
    replica_specs: list[ColossalAIReplicaSpec] | None = Field(None, description="Newer shape: launcher and worker pods.")
    run_policy: ColossalAIRunPolicy = Field(default_factory=ColossalAIRunPolicy, description="Clean-up after the job.")
    run_mode: RunMode | None = Field(None, description="Debug or pause mode.")
    scheduler: SchedulePolicy | None = Field(None, description="Scheduler choice; unset means kube-scheduler.")


class ColossalAIJob(T9kJob):
    """A ColossalAI training job."""

    kind: Literal["ColossalAIJob"]
    spec: ColossalAIJobSpec
