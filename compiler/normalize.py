"""Make a validated job canonical: every default explicit, one shape per kind.

The canonical job is what the in-cluster record holds and what every manifest is rendered
from, so it must carry everything rendering needs and nothing that depends on the input's
spelling.  ColossalAIJob's older launcher/worker shape becomes the replicaSpecs shape.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from .jobtypes import (
    ColossalAIJob,
    ColossalAIReplicaSpec,
    DeepSpeedJob,
    ElasticConfig,
    GenericJob,
    PyTorchTrainingJob,
    TorchConfig,
    Typed,
)

LAUNCHER_CONTAINER = "launcher"


def _elastic(e: ElasticConfig | None) -> ElasticConfig | None:
    if e is None or not e.enabled:
        return e
    if e.expected_replicas is None:
        return e.model_copy(update={"expected_replicas": e.max_replicas})
    return e


def _pytorch(job: PyTorchTrainingJob) -> PyTorchTrainingJob:
    return job.model_copy(update={"spec": job.spec.model_copy(update={"elastic": _elastic(job.spec.elastic)})})


def _deepspeed(job: DeepSpeedJob) -> DeepSpeedJob:
    return job.model_copy(update={"spec": job.spec.model_copy(update={"elastic": _elastic(job.spec.elastic)})})


def _generic(job: GenericJob) -> GenericJob:
    return job


def _worker_container(template: dict[str, Any]) -> dict[str, Any]:
    containers = (template.get("spec") or {}).get("containers") or [{}]
    return next((c for c in containers if c.get("name") == "worker"), containers[0])


def default_launcher_template(worker_template: dict[str, Any], image: str | None = None, working_dir: str | None = None,
                              env: list[dict[str, Any]] | None = None, resources: dict[str, Any] | None = None) -> dict[str, Any]:
    """The launcher pod T9k supplies when none is given: the worker's image, one container."""
    worker = _worker_container(worker_template)
    container: dict[str, Any] = {"name": LAUNCHER_CONTAINER, "image": image or worker.get("image")}
    wd = working_dir if working_dir is not None else worker.get("workingDir")
    if wd:
        container["workingDir"] = wd
    if env:
        container["env"] = copy.deepcopy(env)
    if resources:
        container["resources"] = copy.deepcopy(resources)
    if worker.get("imagePullPolicy"):
        container["imagePullPolicy"] = worker["imagePullPolicy"]
    spec: dict[str, Any] = {"containers": [container]}
    pull = (worker_template.get("spec") or {}).get("imagePullSecrets")
    if pull:
        spec["imagePullSecrets"] = copy.deepcopy(pull)
    return {"spec": spec}


def _colossalai(job: ColossalAIJob) -> ColossalAIJob:
    s = job.spec
    if s.replica_specs is not None:
        specs = list(s.replica_specs)
        worker = next(r for r in specs if r.type == "worker")
        if not any(r.type == "launcher" for r in specs):
            launcher = ColossalAIReplicaSpec(type="launcher", replicas=1, template=default_launcher_template(worker.template))
            specs.insert(0, launcher)
        specs.sort(key=lambda r: r.type != "launcher")  # launcher first: it is rank 0 of the record
        return job.model_copy(update={"spec": s.model_copy(update={"replica_specs": specs})})
    w, lc = s.worker, s.launcher
    assert w is not None  # guaranteed by the colossalai_shape rule
    launcher_template = default_launcher_template(
        w.template,
        image=lc.image if lc else None,
        working_dir=lc.working_dir if lc else None,
        env=lc.env if lc else None,
        resources=lc.resources if lc else None,
    )
    spec = s.model_copy(
        update={
            "launcher": None,
            "worker": None,
            "torch_config": TorchConfig(proc_per_worker=w.proc_per_worker, script=list(w.command), extra_args=list(w.torch_args)),
            "replica_specs": [
                ColossalAIReplicaSpec(type="launcher", replicas=1, template=launcher_template),
                ColossalAIReplicaSpec(type="worker", replicas=w.replicas, template=w.template),
            ],
        }
    )
    return job.model_copy(update={"spec": spec})


NORMALIZERS: dict[type, Callable[[Any], Typed]] = {
    PyTorchTrainingJob: _pytorch,
    DeepSpeedJob: _deepspeed,
    GenericJob: _generic,
    ColossalAIJob: _colossalai,
}


def normalize(job: Typed) -> Typed:
    """Return the canonical form of a validated job (status dropped: it is the runtime's)."""
    out = NORMALIZERS[type(job)](job)
    return out.model_copy(update={"status": None})
