"""Spec types shared by several T9k job kinds (run modes, scheduler, elastic, run policy, ssh).

Field descriptions follow T9k's API reference and user manuals; defaults are the documented
ones (../shared/research/t9k-behavior.md), and docs/architecture.md lists the few chosen
where T9k is silent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import NonNegInt, PosInt, PosInt64, Resources, T9kModel


class ObjectMeta(T9kModel):
    """The subset of Kubernetes ObjectMeta a job spec may set; names must be deterministic."""

    name: str = Field(description="Name of the job; pods are named <name>-<type>-<index>. A DNS-1035 label.")
    namespace: str | None = Field(None, description="Namespace of the job; unset means the namespace the GitOps tool applies to.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels copied to the record (not to pods; use the pod template).")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations copied to the record. flatjob.dev/* keys configure flatjob.")


class T9kJob(T9kModel):
    """What every T9k job has: apiVersion, kind, metadata, spec; status is the runtime's."""

    api_version: Literal["batch.tensorstack.dev/v1beta1"] = Field(alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    spec: Any
    status: dict[str, Any] | None = Field(None, description="Ignored on input: the runtime writes the job's status on its record.")


class ReplicaDebugSet(T9kModel):
    """How one replica type starts in debug mode."""

    type: str = Field(description="The replica type this entry applies to.")
    skip_init_container: bool = Field(False, description="Drop the pod's initContainers in debug mode.")
    command: list[str] | None = Field(None, description="Command run instead of training; default 'sleep inf' (DeepSpeedJob: '/usr/sbin/sshd -D').")


class DebugMode(T9kModel):
    """Debug mode: pods are created with the training environment but do not train."""

    enabled: bool = Field(False, description="Whether debug mode is on.")
    replica_specs: list[ReplicaDebugSet] = Field(default_factory=list, description="Per-type debug settings; types not listed use the default.")


class ResumeSpec(T9kModel):
    """How one replica type restarts when a paused job resumes."""

    type: str = Field(description="The replica type this entry applies to.")
    skip_init_container: bool = Field(False, description="Drop the pod's initContainers when resuming.")
    command: list[str] | None = Field(None, description="Command when resuming; default: the template's command.")
    args: list[str] | None = Field(None, description="Args when resuming; default: the template's args.")


class PauseMode(T9kModel):
    """Pause mode: the job is kept but its pods are deleted (or not created)."""

    enabled: bool = Field(False, description="Whether the job is paused. May be toggled at any time.")
    resume_specs: list[ResumeSpec] = Field(default_factory=list, description="How each type restarts on resume. T9k: cannot be changed (compile warns, FJ322).")


class RunMode(T9kModel):
    """Which mode the job runs in: immediate (default), debug or pause."""

    debug: DebugMode | None = Field(None, description="Debug mode settings.")
    pause: PauseMode | None = Field(None, description="Pause mode settings.")


class T9kScheduler(T9kModel):
    """T9k Scheduler settings: the PodGroup created for the job."""

    queue: str = Field("default", description="Queue the job's PodGroup waits in; default `default`, the default of T9k's PodGroup (docs/architecture.md §7).")
    priority: Annotated[int, Field(ge=0, le=100)] = Field(0, description="PodGroup priority within its queue, 0-100.")


class SchedulePolicy(T9kModel):
    """Which scheduler places the job's pods; unset means the default kube-scheduler."""

    t9k_scheduler: T9kScheduler | None = Field(None, alias="t9kScheduler", description="Use T9k Scheduler with a PodGroup.")


class ElasticConfig(T9kModel):
    """Elastic training: the number of nodes may change between min and max while the job runs."""

    enabled: bool = Field(False, description="Whether elastic mode is on (PyTorchTrainingJob: only with torchrun; ignored without it, as T9k ignores it, FJ302).")
    min_replicas: PosInt | None = Field(None, description="Fewest nodes the job runs with. T9k: cannot change once the job exists (compile warns, FJ322).")
    max_replicas: PosInt | None = Field(None, description="Most nodes the job runs with; PodTemplates are rendered up to this. T9k: cannot change once the job exists (FJ322).")
    expected_replicas: PosInt | None = Field(None, description="Nodes wanted now; default maxReplicas. May be changed in git or by `kubectl scale`.")


class RunPolicy(T9kModel):
    """Run policy of PyTorchTrainingJob and DeepSpeedJob."""

    active_deadline_seconds: PosInt64 | None = Field(None, description="Seconds from job start after which the job fails.")
    backoff_limit: NonNegInt = Field(3, description="Restarts allowed, summed over all replicas, before the job fails (a DeepSpeed group restart counts once).")
    clean_up_policy: Literal["All", "Unfinished", "None"] = Field(
        "Unfinished", description="Pods deleted after the job finishes: All, Unfinished (still running) or None. T9k documents no default here; flatjob frees the GPUs of pods still running."
    )


class SSHConfig(T9kModel):
    """Where SSH keys are mounted and where sshd lives in the image."""

    auth_mount_path: str = Field("/root/.ssh", description="Directory the SSH key Secret is mounted at.")
    sshd_path: str = Field("/usr/sbin/sshd", description="Absolute path of sshd in the worker image (sshd must be run by absolute path).")


class TensorBoardLogPVC(T9kModel):
    """A PVC holding training logs, with the sub-paths to show."""

    name: str = Field(description="PVC name.")
    sub_path: list[str] = Field(default_factory=list, description="Paths inside the PVC holding event files.")


class SecretRef(T9kModel):
    """A Secret in the job's namespace, by name."""

    name: str = Field(description="Secret name.")


class TensorBoardLogS3(T9kModel):
    """T9k's S3 log source. Accepted for T9k compatibility; flatjob does not mount it (FJ321)."""

    secret_ref: SecretRef | None = Field(None, description="Secret with the S3 endpoint and keys (T9k's layout).")
    uri: list[str] = Field(default_factory=list, description="S3 object URIs of the logs.")


class TensorBoardLogHTTP(T9kModel):
    """T9k's HTTP log source. Accepted for T9k compatibility; flatjob does not mount it (FJ321)."""

    url: list[str] = Field(default_factory=list, description="URLs of the log files.")


class TensorBoardLogDir(T9kModel):
    """Where TensorBoard reads logs from."""

    pvc: list[TensorBoardLogPVC] = Field(default_factory=list, description="PVCs with training logs; each is mounted read-only.")
    s3: TensorBoardLogS3 | None = Field(None, description="S3 logs: not rendered by flatjob (lint warns, FJ321).")
    http: TensorBoardLogHTTP | None = Field(None, description="HTTP logs: not rendered by flatjob (lint warns, FJ321).")


class TensorBoardQueue(T9kModel):
    """T9k Scheduler settings of the TensorBoard pod: its queue."""

    queue: str = Field("default", description="Queue the TensorBoard pod waits in (label scheduler.tensorstack.dev/queue); default `default`, as the job's.")


class TensorBoardScheduler(T9kModel):
    """Which scheduler places the TensorBoard pod; unset means the default kube-scheduler."""

    t9k_scheduler: TensorBoardQueue | None = Field(None, alias="t9kScheduler", description="Use T9k Scheduler with this queue.")


class TensorBoardSpec(T9kModel):
    """A TensorBoard shown next to the job: a Deployment and a Service reading its logs from PVCs."""

    image: str = Field(description="Image that runs tensorboard.")
    training_log_filesets: list[str] = Field(
        default_factory=list, description="Deprecated log locations, each t9k://pvc/<pvc>/<path> (t9k://minio/... is not rendered, FJ321)."
    )
    log_dir: TensorBoardLogDir | None = Field(None, description="Log locations; PVCs are rendered.")
    resources: Resources | None = Field(None, description="Container resources (Kubernetes ResourceRequirements).")
    suspend: bool = Field(False, description="Keep the TensorBoard's Service but run no pod (the Deployment has 0 replicas).")
    scheduler: TensorBoardScheduler | None = Field(None, description="Scheduler choice for the TensorBoard pod; unset means kube-scheduler.")


RestartPolicyName = Literal["Never", "OnFailure", "Always", "ExitCode"]


class ReplicaRestartPolicy(T9kModel):
    """GenericJob/ColossalAIJob restart policy: what to do when a replica fails, and how often."""

    policy: Literal["Never", "OnFailure", "Always"] = Field("OnFailure", description="Never, OnFailure or Always.")
    limit: NonNegInt = Field(0, description="Restarts allowed for each replica of this type (T9k: the maximum restarts of this replica).")
