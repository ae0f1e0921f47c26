"""Builders for the decision tables: JobView, PodState, Ledger and Failure from a few words.

Naming follows the compiler: the job is `j`, its pods `j-<type>-<index>` (`j-launcher`); an observed pod's
UID is `uid-<pod>` (`uid-<pod>#2` for its second incarnation) and its spec-hash `h-<pod>`,
which is also what the JobView expects, so a pod built with defaults is current.
Kind defaults mirror runtime.job.job_view; test_decisions_jobview.py checks that they agree
with what the compiler really produces.

    job = job_view("PyTorchTrainingJob", types={"master": 1, "worker": 2})
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit=1))
    led = Ledger(released=released_from(pods))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flatjob.runtime.decisions.outcomes import Failure
from flatjob.runtime.model import JobView, Ledger, PodSpecView, PodState, RestartRule

JOB = "j"
NOW = 1_000_000.0

# What runtime.job.job_view derives per kind (scope, decider, launcher, limits, clean-up).
KIND_DEFAULTS: dict[str, dict[str, Any]] = {
    "PyTorchTrainingJob": {
        "types": {"master": 1, "worker": 2},
        "scope": "pod",  # replicas restart by their own policy (T9k), torchrun or not
        "decider": "first",
        "backoff_limit": 3,
        "cleanup": "Unfinished",
        "launcher_kind": None,
        "policy": "OnFailure",
        "wave1": (),
    },
    "GenericJob": {
        "types": {"worker": 2},
        "scope": "pod",
        "decider": "rule",
        "backoff_limit": None,
        "cleanup": "None",  # T9k's API reference: None is GenericJob's default
        "launcher_kind": None,
        "policy": "OnFailure",
        "wave1": (),
    },
    "DeepSpeedJob": {
        "types": {"worker": 3},
        "scope": "group",
        "decider": "first",
        "backoff_limit": 3,
        "cleanup": "Unfinished",
        "launcher_kind": "deepspeed",
        "policy": "OnFailure",
        "wave1": ("j-worker-0",),  # worker-0 runs `deepspeed` once the others' sshd is up
    },
    "ColossalAIJob": {
        "types": {"launcher": 1, "worker": 2},
        "scope": "none",
        "decider": "first",
        "backoff_limit": None,
        "cleanup": "None",
        "launcher_kind": "colossalai",
        "policy": "Never",
        "wave1": ("j-launcher",),
    },
}


def name(rtype: str, index: int) -> str:
    """`j-<type>-<index>`; ColossalAI's single launcher is `j-launcher` (T9k)."""
    return f"{JOB}-launcher" if rtype == "launcher" else f"{JOB}-{rtype}-{index}"


def specs(
    types: Mapping[str, int],
    *,
    wave1: tuple[str, ...] = (),
    elastic: bool = False,
    hashes: Mapping[str, str] | None = None,
) -> tuple[PodSpecView, ...]:
    """Planned pods in rank order; elastic jobs get seats in rank order."""
    out = []
    rank = 0
    for rtype, count in types.items():
        for index in range(count):
            n = name(rtype, index)
            h = (hashes or {}).get(n, f"h-{n}")
            seat = rank if elastic else None
            out.append(PodSpecView(n, rtype, index, rank, 1 if n in wave1 else 0, seat, h, "main"))
            rank += 1
    return tuple(out)


def job_view(
    kind: str = "PyTorchTrainingJob",
    *,
    types: Mapping[str, int] | None = None,
    policy: str | None = None,
    limit: int | None = None,
    rules: Mapping[str, RestartRule] | None = None,
    elastic: bool = False,
    wave1: tuple[str, ...] | None = None,
    hashes: Mapping[str, str] | None = None,
    **fields: Any,
) -> JobView:
    """A JobView of `kind` with its defaults; any JobView field can be overridden."""
    d = KIND_DEFAULTS[kind]
    types = dict(types or d["types"])
    pods = specs(types, wave1=d["wave1"] if wave1 is None else wave1, elastic=elastic, hashes=hashes)
    if rules is None:
        rule = RestartRule(policy or d["policy"], limit)
        rules = dict.fromkeys(types, rule)
    view = JobView(
        kind=kind,
        name=JOB,
        namespace="default",
        generation=1,
        pods=pods,
        scope=d["scope"],
        rules=dict(rules),
        backoff_limit=d["backoff_limit"],
        deadline=None,
        cleanup=d["cleanup"],
        decider=d["decider"],
        launcher_kind=d["launcher_kind"],
        target=len(pods) if elastic else None,
        min_nodes=1 if elastic else None,
    )
    return replace(view, **fields)


def pod(
    pod_name: str,
    phase: str = "Pending",
    *,
    exit: int | None = None,
    gated: bool | None = None,
    incarnation: int = 1,
    ready: bool | None = None,
    reason: str | None = None,
    message: str | None = None,
    spec_hash: str | None = None,
    deleting: bool = False,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> PodState:
    """An observed pod: gated while Pending, ready while Running, exit 0 once Succeeded."""
    if phase == "Succeeded" and exit is None:
        exit = 0
    term = phase in ("Succeeded", "Failed") and exit is not None
    return PodState(
        name=pod_name,
        uid=uid(pod_name, incarnation),
        phase=phase,
        gated=phase == "Pending" if gated is None else gated,
        deleting=deleting,
        ready=phase == "Running" if ready is None else ready,
        exit_code=exit,
        reason=reason if reason is not None else (("Completed" if exit == 0 else "Error") if term else None),
        message=message,
        spec_hash=spec_hash if spec_hash is not None else f"h-{pod_name}",
        annotations=dict(annotations or {}),
        labels=dict(labels or {}),
        containers=(("main", "Terminated" if term else "Running" if phase == "Running" else "Waiting", exit),),
    )


def uid(pod_name: str, incarnation: int = 1) -> str:
    return f"uid-{pod_name}" if incarnation == 1 else f"uid-{pod_name}#{incarnation}"


def observed(*states: PodState) -> dict[str, PodState]:
    """Pods as the decisions receive them: by name."""
    return {p.name: p for p in states}


def released_from(pods: Mapping[str, PodState], *names: str) -> dict[str, str]:
    """ledger.released for these pods (all of them when no names are given)."""
    return {n: p.uid for n, p in pods.items() if not names or n in names}


def all_running(job: JobView) -> dict[str, PodState]:
    """Every pod of the job released and Running."""
    return observed(*(pod(p.name, "Running") for p in job.pods))


def running_ledger(job: JobView, **fields: Any) -> Ledger:
    """The ledger of a job whose pods were all released at NOW - 100."""
    pods = all_running(job)
    base = Ledger(released=released_from(pods), spec_hashes={p.name: p.spec_hash for p in job.pods}, start_time=NOW - 100)
    return base.evolve(**fields)


def failure(pod_name: str, code: int, *, rtype: str | None = None, incarnation: int = 1, reason: str | None = None) -> Failure:
    """One failed incarnation as outcomes.observe reports it."""
    rtype = rtype or pod_name.split("-")[1]
    return Failure(pod_name, uid(pod_name, incarnation), rtype, code, reason or f"failed with exit code {code}", code if reason is None else None)


def conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """status.conditions by type."""
    return {c["type"]: c for c in status["conditions"]}
