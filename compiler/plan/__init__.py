"""Plan a canonical job: which pods exist, their ranks, addresses and what changes in each.

A plan is plain data; renderers turn it into manifests without knowing the job kind.  One
planner per kind fills it (PLANNERS); the runtime calls the same planners on the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import keys
from ..jobtypes import Typed
from ..options import CompileOptions


@dataclass(frozen=True)
class ContainerPatch:
    """What flatjob changes in a pod's training container; None/empty means unchanged."""

    command: list[str] | None = None  # replaces the container's command
    args: list[str] | None = None  # replaces the container's args ([] clears them)
    env: tuple[dict[str, Any], ...] = ()  # prepended, skipping names the container already sets
    volume_mounts: tuple[dict[str, Any], ...] = ()
    ports: tuple[dict[str, Any], ...] = ()
    startup_probe: dict[str, Any] | None = None  # Ready once it succeeds; then never probed again
    # Put the last log lines in the termination message when the container fails and sets no
    # policy itself: torchrun's failure summary (with the worker's exit code) lands there.
    logs_on_error: bool = False
    # runMode.pause.resumeSpecs: (command, args) run instead when the pod starts a resume.
    resume: tuple[list[str] | None, list[str] | None] | None = None


@dataclass(frozen=True)
class PodPlan:
    """One pod: identity, rank, address, its template and flatjob's changes to it."""

    name: str
    type: str  # replica type
    index: int  # index within its type
    rank: int  # position in the job's pod order (global rank in plain PyTorch mode)
    address: str  # resolvable name: <pod>.<service>
    template: dict[str, Any]  # the user's pod template (shared between pods of a type; never mutated)
    container: int | None  # index of the training container in the template
    patch: ContainerPatch = ContainerPatch()
    volumes: tuple[dict[str, Any], ...] = ()
    drop_init_containers: bool = False  # runMode debug skipInitContainer
    skip_init_on_resume: bool = False  # runMode pause resumeSpecs skipInitContainer
    seat: int | None = None  # elastic release order; None when the job is not elastic
    role: str = "worker"  # flatjob.dev/role: master, worker, launcher, node...
    wave: int = 0  # release order: wave 1 (launchers) is released once wave 0 is Ready


@dataclass(frozen=True)
class ServicePlan:
    """The job's headless Service, and whether every pod also gets its own (GenericJob spec.service)."""

    name: str
    ports: tuple[dict[str, Any], ...] = ()
    per_replica: bool = False  # a headless Service named as each pod, so T9k's <job>-<type>-<rank> resolves
    headless: bool = True  # the Service `<job>` and the pods' subdomain: not for a GenericJob without spec.service (T9k: "no service will be created")


@dataclass(frozen=True)
class JobPlan:
    """Everything the renderers need for one job."""

    job: Any  # the canonical (normalized) typed job
    options: CompileOptions
    service: ServicePlan
    pods: tuple[PodPlan, ...]
    files: dict[str, str] = field(default_factory=dict)  # ConfigMap <job>-flatjob data (hostfiles, scripts)
    min_member: int = 0  # gang size: pods that must exist and fit together
    ssh_secret: str | None = None  # Secret with the SSH key pair (SSH-launched kinds)
    run_mode: str = "immediate"  # immediate | debug | pause

    @property
    def kind(self) -> str:
        return self.job.kind

    @property
    def name(self) -> str:
        return self.job.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.job.metadata.namespace or self.options.namespace

    @property
    def ssh_secret_named(self) -> bool:
        """The job names its SSH Secret (flatjob.dev/ssh-secret), even `<job>-ssh`: the author's,
        which the runtime only reads, never makes or replaces."""
        return bool(self.ssh_secret) and bool(self.job.metadata.annotations.get(keys.SSH_SECRET))


Planner = Callable[[Typed, CompileOptions], JobPlan]


def plan(job: Typed, options: CompileOptions) -> JobPlan:
    """Plan a canonical job with its kind's planner."""
    from .registry import PLANNERS

    return PLANNERS[job.kind](job, options)
