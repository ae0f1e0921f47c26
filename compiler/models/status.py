"""T9k JobStatus, the shape the runtime writes to the record's status subresource.

One shape serves all four kinds (T9k's pages differ in small ways between kinds and manual
versions; flatjob uses the PyTorchTrainingJob reference shape everywhere, plus
observedGeneration and the kstatus-readable conditions documented in docs/architecture.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import T9kModel

Phase = Literal["Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"]
PHASES: tuple[str, ...] = ("Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown")
ReplicaPhase = Literal["Creating", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted"]


class ContainerStatus(T9kModel):
    """The observed state of one container of a replica."""

    name: str = Field(description="Container name.")
    state: str = Field(description="Waiting, Running, Terminated or Unknown.")
    exit_code: int | None = Field(None, description="Exit code when terminated.")


class ReplicaStatus(T9kModel):
    """The observed state of one replica (pod)."""

    name: str = Field(description="Pod name.")
    uid: str | None = Field(None, description="Pod UID.")
    phase: ReplicaPhase = Field(description="Pod phase, plus Creating (not yet created) and Deleted.")
    containers: list[ContainerStatus] = Field(default_factory=list, description="Container states.")
    reason: str | None = Field(None, description="Why the replica is not running as it should (flatjob): Unschedulable, ImagePullBackOff and other waiting reasons, NodeLost, Disrupted.")
    message: str | None = Field(None, description="The details: the scheduler's or kubelet's message, the node and since when.")


class TaskStatus(T9kModel):
    """The observed state of all replicas of one type."""

    type: str = Field(description="Replica type.")
    restart_count: int = Field(0, description="Restarts of replicas of this type, summed.")
    replicas: list[ReplicaStatus] = Field(default_factory=list, description="Per-replica state.")


class Aggregate(T9kModel):
    """Number of replicas in each state."""

    creating: int = Field(0, description="Replicas whose pod is being created (T9k's Creating).")
    pending: int = Field(0, description="Replicas whose pod is Pending.")
    running: int = Field(0, description="Replicas whose pod is Running.")
    succeeded: int = Field(0, description="Replicas whose pod Succeeded.")
    failed: int = Field(0, description="Replicas whose pod Failed.")
    unknown: int = Field(0, description="Replicas whose pod's state is Unknown (its node does not report).")
    deleted: int = Field(0, description="Replicas whose pod is deleted or being deleted (T9k's Deleted).")


class JobCondition(T9kModel):
    """An observation of the job's state (T9k types plus kstatus's Ready/Reconciling/Stalled)."""

    type: str = Field(description="Initialized, Running, ReplicaFailure, Completed, Failed, Paused, Ready, Reconciling, Stalled.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(None, description="Machine-readable reason of the last transition.")
    message: str | None = Field(None, description="Human-readable details.")
    last_transition_time: str | None = Field(None, description="RFC 3339 time of the last transition.")
    observed_generation: int | None = Field(None, description="Record generation this condition describes.")


class DependentReference(T9kModel):
    """The object that shows the job's TensorBoard (flatjob: the Deployment git holds)."""

    api_version: str | None = Field(None, description="apps/v1 (T9k: tensorstack.dev/v1beta1).")
    kind: str | None = Field(None, description="Deployment (T9k: TensorBoard).")
    name: str | None = Field(None, description="<job>-tensorboard.")
    namespace: str | None = Field(None, description="The job's namespace.")
    uid: str | None = Field(None, description="UID of the object, when known.")


class DependentStatus(T9kModel):
    """T9k's DependentStatus of an object the job has (the TensorBoard)."""

    name: str | None = Field(None, description="Name of the dependent object (unset: see dependent.name).")
    dependent: DependentReference | None = Field(None, description="Which object.")
    ready: bool | None = Field(None, description="Whether it is ready (false while not observed).")
    reason: str | None = Field(None, description="DependentReady, DependentNotReady or DependentUnknown (not observed yet).")
    action: str | None = Field(None, description="NOP: the runtime never changes the object (git owns it).")
    note: str | None = Field(None, description="Human-readable state, e.g. TensorBoard [<name>] is ready.")
    type: str | None = Field(None, description="Normal or Warning.")


class JobStatus(T9kModel):
    """The status of a T9k job as written by flatjob's runtime."""

    tasks: list[TaskStatus] = Field(default_factory=list, description="Per-type replica state.")
    aggregate: Aggregate | None = Field(None, description="Replicas per state.")
    conditions: list[JobCondition] = Field(default_factory=list, description="Observed conditions.")
    phase: Phase | None = Field(None, description="Pending, Running, Paused, Resuming, Succeeded, Failed or Unknown.")
    backoff_count: int = Field(0, description="Restarts performed so far, counted against backoffLimit.")
    tensorboard: DependentStatus | None = Field(None, description="TensorBoard status (PyTorchTrainingJob with a rendered tensorboardSpec).")
    observed_generation: int | None = Field(None, description="Record generation the runtime last acted on.")
    selector: str | None = Field(None, description="Label selector of the job's pods (flatjob.dev/job-name=<job>): the scale subresource's labelSelectorPath, which HPA and KEDA read.")
    runtime: dict[str, Any] | None = Field(None, description="The runtime's crash-safe ledger: the attempt, the pods released, succeeded and failed in it (as brace ranges), restarts and back-offs.")
