"""Compile options: choices that are not in the job spec but change what is rendered.

Options that differ from the defaults are recorded on the job record (annotation
flatjob.dev/options), so a reviewer sees how the job was compiled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Literal

from .version import __version__

SchedulerTarget = Literal["auto", "t9k", "kueue", "default"]
RuntimeMode = Literal["namespace", "job"]
RUNTIME_MODES: tuple[str, ...] = ("namespace", "job")

DEFAULT_IMAGE_REPOSITORY = "ghcr.io/flatjob/flatjob"


@dataclass(frozen=True)
class CompileOptions:
    """Options of one compile run; defaults are what a plain cluster needs."""

    namespace: str | None = None  # used when a job sets none; enables the <job>-<type>-<rank> DNS search
    cluster_domain: str = "cluster.local"
    scheduler: SchedulerTarget = "auto"  # auto: t9k when spec.scheduler.t9kScheduler is set, else default
    kueue_queue: str | None = None  # LocalQueue name when scheduler is kueue
    runtime_image: str = f"{DEFAULT_IMAGE_REPOSITORY}:{__version__}"
    local_addresses: bool = False  # run-local: each pod's address is its own loopback IP, not a DNS name
    local_block: int = 1  # run-local: the pods' addresses are 127.0.<block>.1 onwards
    # Who runs the jobs in the cluster: one runtime for every job of a namespace (rendered once
    # per namespace folder), or one per job (in each job's folder).  docs/architecture.md §5.
    runtime: RuntimeMode = "namespace"

    def problems(self) -> dict[str, str]:
        """Option name -> why its value cannot be used (the namespace also names an output folder)."""
        from .validate import names

        why = {
            "namespace": names.dns1123_label(self.namespace) if self.namespace is not None else None,
            "cluster_domain": names.dns1123_subdomain(self.cluster_domain),
            "kueue_queue": names.kueue_queue(self.kueue_queue) if self.kueue_queue is not None else None,
            "runtime_image": names.image_reference(self.runtime_image),
            "runtime": None if self.runtime in RUNTIME_MODES else f"is not one of {', '.join(RUNTIME_MODES)}",
        }
        return {k: v for k, v in why.items() if v}

    def recorded(self) -> str | None:
        """The options that differ from the defaults, as compact JSON for the record (or None)."""
        default = CompileOptions()
        diff = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)}
        diff.pop("namespace", None)  # the namespace is on every object already
        diff.pop("runtime", None)  # the record says it on its own (flatjob.dev/runtime)
        return json.dumps(diff, sort_keys=True, separators=(",", ":")) if diff else None

