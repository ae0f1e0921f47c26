"""Labels and annotations of rendered objects, built from the keys in compiler.keys."""

from __future__ import annotations

from typing import Any

from .. import keys
from ..plan import JobPlan, PodPlan

_T9K_POD_LABELS = {
    # kind -> extra T9k labels documented for that kind's pods (job name -> value)
    "GenericJob": lambda job, pod: {
        keys.GENERICJOB: job,
        keys.GENERICJOB_REPLICA: f"{job}-{pod.type}-{pod.index}",
        keys.T9K_COMPONENT: "genericjob",
        keys.T9K_COMPONENT_TYPE: "user",
    },
}


def common_labels(plan: JobPlan, component: str) -> dict[str, str]:
    """Labels on every object flatjob renders for a job."""
    return {
        keys.APP_NAME: plan.kind.lower(),
        keys.APP_COMPONENT: component,
        keys.APP_PART_OF: plan.name,
        keys.APP_MANAGED_BY: keys.MANAGED_BY_VALUE,
    }


def selector(plan: JobPlan) -> dict[str, str]:
    """Selects the job's own pods (never the runtime's)."""
    return {keys.JOB_NAME: plan.name}


def pod_labels(plan: JobPlan, pod: PodPlan, template_labels: dict[str, Any] | None) -> dict[str, str]:
    """Template labels, then T9k's documented labels, then flatjob's (ours win on conflict)."""
    out: dict[str, str] = dict(template_labels or {})
    out.update(common_labels(plan, pod.type))
    out[keys.T9K_OWNER_NAME] = plan.name
    extra = _T9K_POD_LABELS.get(plan.kind)
    if extra is not None:
        out.update(extra(plan.name, pod))
    out.update(
        {
            keys.JOB_NAME: plan.name,
            keys.JOB_KIND: plan.kind,
            keys.REPLICA_TYPE: pod.type,
            keys.REPLICA_INDEX: str(pod.index),
            keys.ROLE: pod.role,
        }
    )
    return out


def metadata(plan: JobPlan, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """ObjectMeta with the plan's namespace when it has one."""
    meta: dict[str, Any] = {"name": name}
    if plan.namespace:
        meta["namespace"] = plan.namespace
    meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return meta
