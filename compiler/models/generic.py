"""GenericJob: any multi-replica program, wired by compile-time $(...) substitution."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Int32, NonNegInt, PodTemplate, ServicePort, T9kModel
from .common import ReplicaRestartPolicy, RunMode, SchedulePolicy, T9kJob

# A finish rule maps a replica type to ranks of that type: {"worker": [0, 1]}.
# Ranks are IntOrString in T9k's API; strings must hold a decimal rank.
FinishRule = dict[str, list[Int32 | str]]


class GenericReplicaSpec(T9kModel):
    """One group of identical replicas of a GenericJob."""

    type: str = Field(description="Replica type, e.g. master, worker, ps.")
    replicas: NonNegInt = Field(1, description="Number of pods of this type.")
    restart_policy: ReplicaRestartPolicy = Field(default_factory=ReplicaRestartPolicy, description="{policy, limit} for this type.")
    template: PodTemplate = Field(description="Kubernetes PodTemplateSpec; command, args and env may use $(...) variables.")


class ServiceOption(T9kModel):
    """The ports exposed for every replica: a headless Service <job>-<type>-<rank> per replica."""

    ports: list[ServicePort] = Field(default_factory=list, description="Kubernetes ServicePorts of every replica's Service; names are used by $(service.port[name]).")


class GenericJobSpec(T9kModel):
    """Desired state of a GenericJob."""

    replica_specs: list[GenericReplicaSpec] = Field(min_length=1, description="The replica groups.")
    success_rules: list[FinishRule] = Field(default_factory=list, description="The job succeeds when all replicas of any one rule succeeded. Default: every replica.")
    failure_rules: list[FinishRule] = Field(default_factory=list, description="The job fails when all replicas of any one rule failed for good.")
    service: ServiceOption | None = Field(None, description="Expose every replica as <job>-<type>-<rank> in the namespace; enables $(service...) variables.")
    clean_up_policy: Literal["All", "Unfinished", "None"] = Field(
        "None", description="Pods deleted after the job finishes: None (keep every pod; T9k API reference's default), Unfinished (those still running) or All."
    )
    run_mode: RunMode | None = Field(None, description="Debug or pause mode.")
    scheduler: SchedulePolicy | None = Field(None, description="Scheduler choice; unset means kube-scheduler.")


class GenericJob(T9kJob):
    """A multi-replica job with rule-based success and failure."""

    kind: Literal["GenericJob"]
    spec: GenericJobSpec
