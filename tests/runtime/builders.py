"""Builders for the decision tables: JobView, PodState, Ledger and Failure from a few words.

Naming follows the compiler: the job is `j`, its pods `j-<type>-<index>` (`j-launcher`); an observed pod's
UID is `uid-<pod>` (`uid-<pod>#2` for its second incarnation), its spec-hash `h-<pod>`, which
is also what the JobView expects, and its attempt 1, so a pod built with defaults is current.
Kind defaults mirror runtime.job.job_view; test_decisions_jobview.py checks that they agree
with what the compiler really produces (`compiled`: a record and its PodTemplates).

    job = job_view("PyTorchTrainingJob", types={"master": 1, "worker": 2})
    pods = observed(pod("j-master-0", "Running"), pod("j-worker-0", "Failed", exit=1))
    led = Ledger(released=released_from(pods))
    c = cycle(job, pods, led)          # one whole reconcile; acts(c) lists its actions
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flatjob.runtime.decisions import Cycle, World, reconcile
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
    attempt: int | None = 1,
    ours: bool = True,
    disruption: str | None = None,
    node_lost_since: float | None = None,
    started_at: float | None = None,
    waiting: str | None = None,
    unschedulable: str | None = None,
) -> PodState:
    """An observed pod the runtime created for `attempt`: gated while Pending, ready while
    Running, exit 0 once Succeeded."""
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
        attempt=attempt,
        ours=ours,
        containers=(("main", "Terminated" if term else "Running" if phase == "Running" else "Waiting", exit),),
        node="node-1" if phase != "Pending" or node_lost_since is not None else None,
        started_at=started_at,
        disruption=disruption,
        disruption_message=DISRUPTION_MESSAGES.get(disruption or ""),
        node_lost_since=node_lost_since,
        waiting=waiting,
        unschedulable=unschedulable,
    )


# The messages Kubernetes writes with each DisruptionTarget reason (runtime/sim's sources).
DISRUPTION_MESSAGES = {
    "EvictionByEvictionAPI": "Eviction API: evicting",
    "PreemptionByScheduler": "default-scheduler: preempting to accommodate a higher priority pod",
    "DeletionByTaintManager": "Taint manager: deleting due to NoExecute taint",
    "DeletionByPodGC": "PodGC: node no longer exists",
    "TerminationByKubelet": "The node was low on resource: memory. ",
}


def uid(pod_name: str, incarnation: int = 1) -> str:
    return f"uid-{pod_name}" if incarnation == 1 else f"uid-{pod_name}#{incarnation}"


def observed(*states: PodState) -> dict[str, PodState]:
    """Pods as the decisions receive them: by name."""
    return {p.name: p for p in states}


def gated(job: JobView, *skip: str, attempt: int | None = 1, **overrides: PodState) -> dict[str, PodState]:
    """Every pod of the job created for `attempt` and still gated, except `skip`; `overrides`
    replace single pods by name (`**{"j-worker-0": pod(...)}`)."""
    return observed(*(overrides.get(p.name) or pod(p.name, attempt=attempt) for p in job.pods if p.name not in skip))


def released_from(pods: Mapping[str, PodState], *names: str) -> tuple[str, ...]:
    """ledger.released for these pods (all of them when no names are given)."""
    return tuple(sorted(n for n in pods if not names or n in names))


def all_running(job: JobView) -> dict[str, PodState]:
    """Every pod of the job released and Running."""
    return observed(*(pod(p.name, "Running") for p in job.pods))


def running_ledger(job: JobView, **fields: Any) -> Ledger:
    """The ledger of a job whose pods were all released at NOW - 100."""
    pods = all_running(job)
    base = Ledger(released=released_from(pods), start_time=NOW - 100)
    return base.evolve(**fields)


def failure(pod_name: str, code: int, *, rtype: str | None = None, incarnation: int = 1, reason: str | None = None) -> Failure:
    """One failed incarnation as outcomes.observe reports it."""
    rtype = rtype or pod_name.split("-")[1]
    return Failure(pod_name, uid(pod_name, incarnation), rtype, code, reason or f"failed with exit code {code}", code if reason is None else None)


def conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """status.conditions by type."""
    return {c["type"]: c for c in status["conditions"]}


def cycle(job: JobView, pods: Mapping[str, PodState], led: Ledger | None = None, world: World | None = None, now: float = NOW, previous: Mapping[str, Any] | None = None) -> Cycle:
    """One whole reconcile cycle (ledger, status, actions) with everything ready by default."""
    return reconcile(job, pods, led or Ledger(), world or World(), previous, now)


def acts(c: Cycle, *kinds: str) -> tuple[tuple[str, str], ...]:
    """The cycle's actions as (kind, pod), in order; only these kinds when given."""
    return tuple((a.kind, a.name) for a in c.actions if not kinds or a.kind in kinds)


def compiled(text: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A job spec compiled as `flatjob compile` does (compile_documents), seen as the runtime
    sees it: the record, and the PodTemplates by name (what runtime.job.job_view takes)."""
    from manifestkit import objects_of

    from flatjob.compiler import keys
    from flatjob.compiler.loader import Loaded, parse
    from flatjob.compiler.options import CompileOptions
    from flatjob.compiler.pipeline import compile_documents

    docs, problems = parse(text, "job.yaml")
    assert not problems, problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions())
    assert not result.failed, [d.message for d in result.diagnostics]
    objects = objects_of(result.jobs[0].files)
    record = next(o for o in objects if o["apiVersion"] == keys.RECORD_API_VERSION)
    return record, {o["metadata"]["name"]: o for o in objects if o["kind"] == "PodTemplate"}
