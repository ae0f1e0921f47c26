"""The in-cluster job record: the canonical job under flatjob.dev, read by the runtime and users.

Its spec is the normalized, fully defaulted T9k spec (no CRD defaults, so no GitOps drift);
annotations carry the flatjob version (the runtime refuses a record from another version),
non-default compile options, and the set of PodTemplates this revision renders.
"""

from __future__ import annotations

from typing import Any

from .. import keys
from ..plan import JobPlan
from ..version import __version__
from .meta import common_labels, metadata
from .pod import pod_templates_digest
from .tensorboard import render_tensorboard, tensorboard_name

PLURALS = keys.RECORD_PLURALS
ELASTIC_KINDS = ("PyTorchTrainingJob", "DeepSpeedJob")


def record_spec(plan: JobPlan) -> dict[str, Any]:
    """The canonical spec as the API stores it."""
    return plan.job.spec.wire()


def render_record(plan: JobPlan) -> list[dict[str, Any]]:
    """The job record manifest."""
    job = plan.job
    labels = {**job.metadata.labels, **common_labels(plan, "job")}
    annotations = {**job.metadata.annotations, keys.VERSION: __version__, keys.RUN_MODE: plan.run_mode, keys.POD_TEMPLATES: pod_templates_digest(plan),
                   keys.RUNTIME_MODE: plan.options.runtime}
    if render_tensorboard(plan):
        annotations[keys.TENSORBOARD] = tensorboard_name(plan.name)
    recorded = plan.options.recorded()
    if recorded:
        annotations[keys.OPTIONS] = recorded
    return [
        {
            "apiVersion": keys.RECORD_API_VERSION,
            "kind": plan.kind,
            "metadata": metadata(plan, plan.name, labels, annotations),
            "spec": record_spec(plan),
        }
    ]
