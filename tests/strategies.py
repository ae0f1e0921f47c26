"""Hypothesis strategies for valid T9k job specs, built as plain dicts.

`pytorch_jobs()` draws PyTorchTrainingJobs that `flatjob lint` accepts: plain DDP or torchrun,
optionally elastic with scalingWeight, with sidecars, GPU limits, user env and labels,
namespaces, TensorBoard, T9k Scheduler and runPolicy.  `job_yaml` turns a drawn dict into the
YAML text a user would commit.  Used by tests/test_properties_pytorch.py; reusable by any test
that needs random valid jobs.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

API_VERSION = "batch.tensorstack.dev/v1beta1"

# Env names flatjob sets itself; a user value would (by design) win over flatjob's.
FLATJOB_ENV = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"})
TYPE_POOL = ("master", "worker", "node", "ps", "chief", "eval")
GPU = "nvidia.com/gpu"

# Names are kept short enough that <job>-<type>-<index> always fits in 63 characters.
job_names = st.from_regex(r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?", fullmatch=True)
namespaces = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)
type_names = st.one_of(
    st.sampled_from(TYPE_POOL), st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True)
)
env_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: n not in FLATJOB_ENV
)
label_keys = st.from_regex(
    r"([a-z]{1,8}\.[a-z]{2,4}/)?[a-z][a-z0-9._-]{0,10}[a-z0-9]", fullmatch=True
)
label_values = st.from_regex(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,14}[A-Za-z0-9])?)?", fullmatch=True)
scalars = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
images = st.sampled_from(
    ["pytorch/pytorch:2.4.0", "nvcr.io/nvidia/pytorch:24.05-py3", "busybox:1.36"]
)


@st.composite
def training_container(draw: st.DrawFn, *, name: str, torchrun: bool) -> dict[str, Any]:
    """The container that trains: script in args for torchrun, in command otherwise."""
    c: dict[str, Any] = {"name": name, "image": draw(images)}
    script = [
        "train.py",
        *draw(st.lists(st.sampled_from(["--epochs", "3", "--lr=0.1", "yes", "1e3"]), max_size=3)),
    ]
    if torchrun:
        c["command"] = ["python"]
        c["args"] = script
    else:
        c["command"] = ["python", *script]
    env = draw(st.dictionaries(env_names, scalars, max_size=3))
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    gpus = draw(st.none() | st.integers(1, 8))
    if gpus is not None:
        c["resources"] = {"limits": {GPU: gpus, "memory": "8Gi"}}
    return c


@st.composite
def pod_template(draw: st.DrawFn, *, torchrun: bool) -> dict[str, Any]:
    """A PodTemplateSpec with a training container, maybe after a sidecar, labels, volumes."""
    named = draw(st.booleans())
    main = draw(training_container(name="python" if named else "pytorch", torchrun=torchrun))
    containers = [main]
    if named and draw(st.booleans()):  # the one named python trains, even when not first
        containers.insert(
            0, {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "inf"]}
        )
    spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        main["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    template: dict[str, Any] = {"spec": spec}
    labels = draw(st.dictionaries(label_keys, label_values, max_size=2))
    if labels:
        template["metadata"] = {"labels": labels}
    return template


@st.composite
def elastic_config(draw: st.DrawFn) -> dict[str, Any]:
    """spec.elastic with min <= expected <= max (expected sometimes left to its default)."""
    lo = draw(st.integers(1, 4))
    hi = draw(st.integers(lo, 8))
    cfg: dict[str, Any] = {"enabled": True, "minReplicas": lo, "maxReplicas": hi}
    expected = draw(st.none() | st.integers(lo, hi))
    if expected is not None:
        cfg["expectedReplicas"] = expected
    return cfg


@st.composite
def torchrun_config(draw: st.DrawFn) -> dict[str, Any]:
    """spec.torchrunConfig, enabled."""
    cfg: dict[str, Any] = {
        "enabled": True,
        "procPerNode": draw(st.sampled_from(["1", "2", "4", "8", "gpu"])),
        "rdzvBackend": draw(st.sampled_from(["c10d", "c10d", "etcd", "etcd-v2"])),
        "maxRestarts": draw(st.integers(0, 3)),
    }
    extra = draw(
        st.lists(
            st.sampled_from(["--monitor_interval=5", "--start_method=fork"]),
            max_size=2,
            unique=True,
        )
    )
    if extra:
        cfg["extraOptions"] = extra
    return cfg


@st.composite
def replica_specs(draw: st.DrawFn, *, torchrun: bool, elastic: bool) -> list[dict[str, Any]]:
    """1-3 replica specs with unique types and at least one pod (or positive weight)."""
    types = draw(st.lists(type_names, min_size=1, max_size=3, unique=True))
    specs = []
    for t in types:
        spec: dict[str, Any] = {"type": t, "replicas": draw(st.integers(0, 5))}
        if draw(st.booleans()):
            spec["restartPolicy"] = draw(
                st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"])
            )
        if elastic and draw(st.booleans()):
            spec["scalingWeight"] = draw(st.integers(0, 4))
        spec["template"] = draw(pod_template(torchrun=torchrun))
        specs.append(spec)
    weights = [s.get("scalingWeight", s["replicas"]) for s in specs]
    if sum(weights if elastic else [s["replicas"] for s in specs]) == 0:
        specs[0]["replicas"] = 1
        specs[0].pop("scalingWeight", None)
    return specs


@st.composite
def extras(draw: st.DrawFn) -> dict[str, Any]:
    """Optional spec parts that do not change ranks: runPolicy, scheduler, TensorBoard."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        policy = {
            "backoffLimit": draw(st.integers(0, 5)),
            "cleanUpPolicy": draw(st.sampled_from(["All", "Unfinished", "None"])),
        }
        if draw(st.booleans()):
            policy["activeDeadlineSeconds"] = draw(st.integers(1, 86400))
        out["runPolicy"] = policy
    if draw(st.booleans()):
        out["scheduler"] = {
            "t9kScheduler": {"queue": draw(job_names), "priority": draw(st.integers(0, 100))}
        }
    if draw(st.booleans()):
        log = (
            {"trainingLogFilesets": ["t9k://pvc/logs/run1", "t9k://pvc/other/x/y"]}
            if draw(st.booleans())
            else {"logDir": {"pvc": [{"name": "logs", "subPath": ["tb", "eval"]}]}}
        )
        out["tensorboardSpec"] = {"image": "tensorflow/tensorflow:2.14.0", **log}
    return out


@st.composite
def pytorch_jobs(
    draw: st.DrawFn, *, torchrun: bool | None = None, elastic: bool | None = None
) -> dict[str, Any]:
    """A valid PyTorchTrainingJob as a dict; pass torchrun/elastic to pin a mode."""
    use_torchrun = draw(st.booleans()) if torchrun is None else torchrun
    use_elastic = use_torchrun and (draw(st.booleans()) if elastic is None else elastic)
    spec: dict[str, Any] = {}
    if use_torchrun:
        spec["torchrunConfig"] = draw(torchrun_config())
    if use_elastic:
        spec["elastic"] = draw(elastic_config())
    spec.update(draw(extras()))
    spec["replicaSpecs"] = draw(replica_specs(torchrun=use_torchrun, elastic=use_elastic))
    metadata: dict[str, Any] = {"name": draw(job_names)}
    ns = draw(st.none() | namespaces)
    if ns is not None:
        metadata["namespace"] = ns
    return {
        "apiVersion": API_VERSION,
        "kind": "PyTorchTrainingJob",
        "metadata": metadata,
        "spec": spec,
    }


def job_yaml(*jobs: dict[str, Any]) -> str:
    """The YAML text of one or more jobs, as a user would write them."""
    return yaml.safe_dump_all(list(jobs), sort_keys=False, allow_unicode=True)


def pod_weights(job: dict[str, Any]) -> list[tuple[str, int]]:
    """(type, elastic weight) per replica spec: scalingWeight, else replicas."""
    return [(r["type"], r.get("scalingWeight", r["replicas"])) for r in job["spec"]["replicaSpecs"]]
