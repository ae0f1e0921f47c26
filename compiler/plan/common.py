"""Planning steps shared by every kind: pod identities, addresses, elastic seats, run modes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..jobtypes import PyTorchTrainingJob, RunMode
from ..podset import elastic_of, pod_name
from ..podtemplate import training_index
from . import ContainerPatch, PodPlan
from .elastic import allocation, seat_order


@dataclass(frozen=True)
class Layout:
    """Replica types in rank order with the number of PodTemplates rendered for each."""

    types: tuple[tuple[str, int, dict[str, Any]], ...]  # (type, pods, template)

    @property
    def total(self) -> int:
        return sum(n for _, n, _ in self.types)


def address(pod: str, service: str) -> str:
    """A pod's resolvable name: <pod>.<service> (hostname + subdomain, default DNS search)."""
    return f"{pod}.{service}"


def local_address(position: int, block: int = 1) -> str:
    """run-local: the pod at `position` gets its own loopback IP (127.0.1.1, 127.0.1.2, ...;
    block B starts at 127.0.B.1).

    Linux routes all of 127/8 to the loopback device, so pods keep apart by address and may
    use the same port, as they do in a cluster.
    """
    return f"127.0.{block + position // 254}.{1 + position % 254}"


def elastic_weights(job: Any, specs: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(type, weight): scalingWeight, or the type's replicas when unset."""
    if isinstance(job, PyTorchTrainingJob):
        return [(r.type, r.scaling_weight if r.scaling_weight is not None else r.replicas) for r in job.spec.replica_specs]
    return specs


def layout(job: Any, specs: list[tuple[str, int, dict[str, Any]]]) -> Layout:
    """Pods per type: the replicas, or each type's share of maxReplicas when elastic."""
    e = elastic_of(job)
    if e is None or not e.max_replicas:
        return Layout(tuple(specs))
    counts = allocation(elastic_weights(job, [(t, n) for t, n, _ in specs]), e.max_replicas)
    return Layout(tuple((t, counts[t], tpl) for t, _, tpl in specs))


def base_pods(job: Any, lay: Layout, service: str, *, local: bool = False, block: int = 1) -> list[PodPlan]:
    """One PodPlan per pod in rank order, with elastic seats when the job is elastic.

    `local` (CompileOptions.local_addresses, for run-local) gives each pod a loopback IP in
    `block` (CompileOptions.local_block).
    """
    name = job.metadata.name
    pods: list[PodPlan] = []
    for rtype, count, template in lay.types:
        idx = training_index(job.kind, template)
        for i in range(count):
            pod = pod_name(name, rtype, i)
            addr = local_address(len(pods), block) if local else address(pod, service)
            pods.append(PodPlan(pod, rtype, i, len(pods), addr, template, idx, role=rtype))
    e = elastic_of(job)
    if e is not None and e.max_replicas:
        order = seat_order(elastic_weights(job, [(t, n) for t, n, _ in lay.types]), e.max_replicas)
        seats = {key: s for s, key in enumerate(order)}
        pods = [replace(p, seat=seats.get((p.type, p.index))) for p in pods]
    return pods


def release_counts(job: Any, total: int) -> tuple[int, int]:
    """(pods released at start, gang minimum): expected/min when elastic, else all pods."""
    e = elastic_of(job)
    if e is None:
        return total, total
    return e.expected_replicas or e.max_replicas or total, e.min_replicas or total


def run_mode_name(mode: RunMode | None) -> str:
    """immediate, debug or pause (pause wins when both are on; lint reports that as an error)."""
    if mode is not None and mode.pause is not None and mode.pause.enabled:
        return "pause"
    if mode is not None and mode.debug is not None and mode.debug.enabled:
        return "debug"
    return "immediate"


def debug_patch(mode: RunMode | None, rtype: str, default: tuple[str, ...], base: ContainerPatch) -> tuple[ContainerPatch, bool]:
    """In debug mode, replace the training command (the env stays, to train by hand)."""
    if run_mode_name(mode) != "debug":
        return base, False
    assert mode is not None and mode.debug is not None
    entry = next((d for d in mode.debug.replica_specs if d.type == rtype), None)
    command = list(entry.command) if entry is not None and entry.command else list(default)
    return replace(base, command=command, args=[]), bool(entry is not None and entry.skip_init_container)


def resume_entries(mode: RunMode | None) -> list[Any]:
    """runMode.pause.resumeSpecs, or none when the job has no pause section."""
    return list(mode.pause.resume_specs) if mode is not None and mode.pause is not None else []


def resume_patch(mode: RunMode | None, rtype: str, base: ContainerPatch) -> tuple[ContainerPatch, bool]:
    """resumeSpecs: what the pod runs (and whether init containers are skipped) on a resume.

    The pod is the same one git renders; its command chooses at start time, from the
    flatjob.dev/resuming annotation the runtime sets when it releases a resumed attempt.
    """
    entry = next((r for r in resume_entries(mode) if r.type == rtype), None)
    if entry is None:
        return base, False
    resume = (list(entry.command) if entry.command is not None else None, list(entry.args) if entry.args is not None else None)
    changes = resume != (None, None)
    return (replace(base, resume=resume) if changes else base), entry.skip_init_container


def mode_patch(mode: RunMode | None, rtype: str, default_debug: tuple[str, ...], base: ContainerPatch) -> tuple[ContainerPatch, bool, bool]:
    """Debug or resume changes for one replica type: (patch, drop init containers, skip them on resume)."""
    patch, drop = debug_patch(mode, rtype, default_debug, base)
    if drop or run_mode_name(mode) == "debug":
        return patch, drop, False
    patch, skip = resume_patch(mode, rtype, patch)
    return patch, False, skip



def env(name: str, value: str) -> dict[str, str]:
    """A literal EnvVar."""
    return {"name": name, "value": value}
