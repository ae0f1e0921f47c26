"""PyTorchTrainingJob: plain DDP (MASTER_ADDR/RANK env) or torchrun, optionally elastic."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Int32, NonNegInt, PodTemplate, T9kModel
from .common import (
    ElasticConfig,
    RestartPolicyName,
    RunMode,
    RunPolicy,
    SchedulePolicy,
    T9kJob,
    TensorBoardSpec,
)


class PyTorchReplicaSpec(T9kModel):
    """One group of identical replicas (pods) of a PyTorchTrainingJob."""

    type: str = Field(description="Replica type, e.g. master, worker, node, ps. The first spec's replica 0 is the master.")
    replicas: NonNegInt = Field(1, description="Number of pods of this type.")
    restart_policy: RestartPolicyName = Field(
        "Never", description="Never, OnFailure, Always or ExitCode (retry only on 130, 137, 138, 143); each replica of this type restarts alone, by this policy. The pod's own restartPolicy is forced to Never."
    )
    scaling_weight: NonNegInt | None = Field(None, description="Elastic mode: share of the nodes given to this type (default: its replicas).")
    template: PodTemplate = Field(description="Kubernetes PodTemplateSpec for these pods.")


class TorchrunConfig(T9kModel):
    """Launch training with torchrun instead of the container's command."""

    enabled: bool = Field(False, description="Rewrite the training container's command to torchrun <options> <args>.")
    max_restarts: NonNegInt = Field(0, description="torchrun --max-restarts: worker-group restarts inside a pod.")
    proc_per_node: str = Field("1", description="torchrun --nproc-per-node: a number; 'gpu' (the replica's GPU count); 'cpu' or 'auto' (passed on to torchrun).")
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2"] = Field("c10d", description="Rendezvous backend: c10d (built in), etcd or etcd-v2 (user-provided).")
    extra_options: list[str] = Field(default_factory=list, description="More torchrun options, placed before the script.")
    min_nodes: Int32 | None = Field(None, description="Deprecated and ignored (shown in one T9k example); use spec.elastic.", exclude=True)


class PyTorchTrainingJobSpec(T9kModel):
    """Desired state of a PyTorchTrainingJob."""

    replica_specs: list[PyTorchReplicaSpec] = Field(min_length=1, description="The replica groups; order sets global ranks.")
    torchrun_config: TorchrunConfig | None = Field(None, description="Use torchrun to launch training.")
    elastic: ElasticConfig | None = Field(None, description="Elastic training; effective only with torchrun (T9k), ignored otherwise (FJ302).")
    tensorboard_spec: TensorBoardSpec | None = Field(None, description="A TensorBoard for the training logs: a Deployment and Service <job>-tensorboard (T9k: a TensorBoard object).")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Deadline, backoff limit and clean-up.")
    run_mode: RunMode | None = Field(None, description="Debug or pause mode.")
    scheduler: SchedulePolicy | None = Field(None, description="Scheduler choice; unset means kube-scheduler.")


class PyTorchTrainingJob(T9kJob):
    """A distributed PyTorch training job."""

    kind: Literal["PyTorchTrainingJob"]
    spec: PyTorchTrainingJobSpec
