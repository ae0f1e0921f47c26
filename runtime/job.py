"""Turn a job record into a JobView, using the compiler's own planner and pod renderer.

Re-rendering through the compiler is what keeps the runtime and git in agreement: the pod
the runtime would create is byte-for-byte the pod git holds, and its spec-hash matches.
"""

from __future__ import annotations

from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.jobtypes import KINDS
from flatjob.compiler.normalize import normalize
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.plan import JobPlan, plan
from flatjob.compiler.plan.common import elastic_of
from flatjob.compiler.render.pod import render_pod
from flatjob.compiler.render.tensorboard import render_tensorboard, tensorboard_name
from flatjob.compiler.validate.typed import strict_job

from .model import JobView, PodSpecView, RestartRule

_META_FIELDS = ("name", "namespace", "labels", "annotations")


class RecordError(ValueError):
    """The record cannot be read as a job of this flatjob version (refused loudly)."""


def typed_job(record: dict[str, Any]) -> Any:
    """The canonical typed job held by a record (live metadata fields are dropped)."""
    kind = record.get("kind")
    if kind not in KINDS:
        raise RecordError(f"unknown record kind {kind!r}")
    meta = {k: v for k, v in (record.get("metadata") or {}).items() if k in _META_FIELDS and v is not None}
    try:
        job = strict_job(kind, {"apiVersion": keys.T9K_API_VERSION, "kind": kind, "metadata": meta, "spec": record.get("spec")})
    except Exception as exc:  # pydantic.ValidationError: a record this version cannot read
        raise RecordError(f"record {meta.get('name')!r} does not match the {kind} schema: {exc}") from exc
    return normalize(job)


def record_plan(record: dict[str, Any]) -> JobPlan:
    """Plan the record's job with the options it was compiled with."""
    job = typed_job(record)
    annotations = (record.get("metadata") or {}).get("annotations") or {}
    options = CompileOptions.from_recorded(annotations.get(keys.OPTIONS), job.metadata.namespace)
    return plan(job, options)


def render_pod_named(job_plan: JobPlan, name: str) -> dict[str, Any] | None:
    """The pod manifest git holds for `name`, rendered exactly as compile does."""
    pod = next((p for p in job_plan.pods if p.name == name), None)
    return render_pod(job_plan, pod) if pod is not None else None


def _container_name(pod: Any) -> str | None:
    containers = (pod.template.get("spec") or {}).get("containers") or []
    if pod.container is None or pod.container >= len(containers):
        return None
    return containers[pod.container].get("name")


def _rules(job: Any) -> dict[str, RestartRule]:
    spec = job.spec
    if job.kind == "GenericJob":
        return {r.type: RestartRule(r.restart_policy.policy, r.restart_policy.limit) for r in spec.replica_specs}
    if job.kind == "PyTorchTrainingJob":
        return {r.type: RestartRule(r.restart_policy) for r in spec.replica_specs}
    if job.kind == "DeepSpeedJob":
        return {"worker": RestartRule(spec.worker.restart_policy)}
    return {r.type: RestartRule("Never") for r in spec.replica_specs or []}  # ColossalAI: no re-join


# What one failure restarts (docs/architecture.md, "Restart scope"): PyTorchTrainingJob
# restarts replicas by their own policy in both modes, as T9k's manual describes.
_SCOPE = {"PyTorchTrainingJob": "pod", "GenericJob": "pod", "DeepSpeedJob": "group", "ColossalAIJob": "none"}


def _launcher(job: Any) -> str | None:
    if job.kind == "PyTorchTrainingJob":
        tr = job.spec.torchrun_config
        return "torchrun" if tr is not None and tr.enabled else None
    return {"DeepSpeedJob": "deepspeed", "ColossalAIJob": "colossalai"}.get(job.kind)


def _cleanup(job: Any) -> str:
    if job.kind == "ColossalAIJob":
        return "Workers" if job.spec.run_policy.clean_up_workers else "None"
    if job.kind == "GenericJob":
        return job.spec.clean_up_policy
    return job.spec.run_policy.clean_up_policy


def _ranks(rule: dict[str, list[Any]]) -> dict[str, tuple[int, ...]]:
    return {t: tuple(int(r) for r in ranks) for t, ranks in rule.items()}


def job_view(record: dict[str, Any]) -> JobView:
    """Everything the decisions need from a record."""
    p = record_plan(record)
    job = p.job
    meta = record.get("metadata") or {}
    pods = tuple(
        PodSpecView(pod.name, pod.type, pod.index, pod.rank, pod.wave, pod.seat, render_pod(p, pod)["metadata"]["annotations"][keys.SPEC_HASH], _container_name(pod))
        for pod in p.pods
    )
    e = elastic_of(job)
    target = min_nodes = None
    if e is not None:
        min_nodes = e.min_replicas
        want = e.expected_replicas or e.max_replicas
        target = max(e.min_replicas or 1, min(want, e.max_replicas))
    run_policy = getattr(job.spec, "run_policy", None)
    generic = job.kind == "GenericJob"
    from flatjob.compiler.render.podgroup import render_podgroup

    return JobView(
        kind=job.kind,
        name=job.metadata.name,
        namespace=job.metadata.namespace,
        generation=meta.get("generation"),
        pods=pods,
        scope=_SCOPE[job.kind],
        rules=_rules(job),
        backoff_limit=None if generic or job.kind == "ColossalAIJob" else run_policy.backoff_limit,
        deadline=getattr(run_policy, "active_deadline_seconds", None),
        cleanup=_cleanup(job),
        decider="rule" if generic else "first",
        success_rules=tuple(_ranks(r) for r in job.spec.success_rules) if generic else (),
        failure_rules=tuple(_ranks(r) for r in job.spec.failure_rules) if generic else (),
        run_mode=p.run_mode,
        target=target,
        min_nodes=min_nodes,
        ssh_secret=p.ssh_secret,
        podgroup=bool(render_podgroup(p)) if p.run_mode != "pause" else False,
        launcher_kind=_launcher(job),
        version=(meta.get("annotations") or {}).get(keys.VERSION),
        **_added_facts(p),
    )


# --- Facts added after the first JobView (kept in one place, each with a default in model.py) ---


def _added_facts(p: JobPlan) -> dict[str, Any]:
    """JobView fields computed from the plan: the TensorBoard Deployment git holds (status.tensorboard)."""
    return {"tensorboard": tensorboard_name(p.name) if render_tensorboard(p) else None}
