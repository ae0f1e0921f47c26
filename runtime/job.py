"""Turn a job record and its PodTemplates into a JobView: what the decisions need.

The pods are the PodTemplates git holds, one per pod, named as the pod; each carries what
the compiler knew about its pod (rank, wave, elastic seat, training container) as
annotations, and its template carries the spec-hash.  The policies come from the record's
spec, read with the compiler's typed jobs.  The runtime never plans or renders: the compiler
wrote everything it needs into git (tests/test_layering.py keeps it that way).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flatjob.compiler import keys
from flatjob.compiler.jobtypes import KINDS
from flatjob.compiler.limits import DEFAULT as DEFAULT_LIMITS
from flatjob.compiler.normalize import normalize
from flatjob.compiler.podset import pod_total, template_runs
from flatjob.compiler.podtemplate import templates_digest
from flatjob.compiler.typedjob import strict_job

from .model import JobView, NamedPod, PodSpecView, RestartRule
from .nameset import NO_NAMES, PodNames
from .pruning import prune, record_spec_schema
from .trim import TEMPLATE_BYTES, spec_of, ssh_secrets

_META_FIELDS = ("name", "namespace", "labels", "annotations")
SSH_KINDS = ("DeepSpeedJob", "ColossalAIJob")
MISSING_SHOWN = 3  # missing PodTemplates a problem names


class RecordError(ValueError):
    """The record cannot be read as a job of this flatjob version (refused loudly)."""


def known_spec(record: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """The record's spec without the fields this version's CRD does not declare, and their
    paths (a newer CRD's fields: see runtime/pruning.py)."""
    dropped: list[str] = []
    spec = spec_of(record)
    plural = keys.RECORD_PLURALS.get(str(record.get("kind")))
    if plural is None or not isinstance(spec, dict):
        return spec, dropped
    return prune(spec, record_spec_schema(plural), "spec", dropped), dropped


def typed_job(record: Mapping[str, Any]) -> Any:
    """The canonical typed job held by a record (live metadata fields and spec fields this
    version does not know are dropped)."""
    return _typed(record)[0]


def _typed(record: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """typed_job, and the paths of the spec fields it dropped (one parse and prune of the spec)."""
    kind = record.get("kind")
    if kind not in KINDS:
        raise RecordError(f"unknown record kind {kind!r}")
    meta = {k: v for k, v in (record.get("metadata") or {}).items() if k in _META_FIELDS and v is not None}
    spec, dropped = known_spec(record)
    try:
        job = strict_job(kind, {"apiVersion": keys.T9K_API_VERSION, "kind": kind, "metadata": meta, "spec": spec})
    except Exception as exc:  # pydantic.ValidationError: a record this version cannot read
        raise RecordError(f"record {meta.get('name')!r} does not match the {kind} schema: {exc}") from exc
    # Counted before any name is made: one record edited to 10 000 000 replicas would otherwise
    # cost the namespace runtime a minute and a GiB (the CRD bounds replicas only below).
    pods = pod_total(job)
    if pods > DEFAULT_LIMITS.job_pods:
        raise RecordError(f"record {meta.get('name')!r} asks for {pods:,} pods, more than the {DEFAULT_LIMITS.job_pods:,} flatjob runs for one job")
    return normalize(job), dropped


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


def _torchrun(job: Any) -> bool:
    tr = getattr(job.spec, "torchrun_config", None)
    return tr is not None and bool(tr.enabled)


def _launcher(job: Any) -> str | None:
    if job.kind == "PyTorchTrainingJob":
        return "torchrun" if _torchrun(job) else None
    return {"DeepSpeedJob": "deepspeed", "ColossalAIJob": "colossalai"}.get(job.kind)


def _cleanup(job: Any) -> str:
    if job.kind == "ColossalAIJob":
        return "Workers" if job.spec.run_policy.clean_up_workers else "None"
    if job.kind == "GenericJob":
        return job.spec.clean_up_policy
    return job.spec.run_policy.clean_up_policy


def _elastic(job: Any) -> Any:
    """The elastic config in effect: PyTorchTrainingJob's only in torchrun mode (T9k), as compile."""
    e = getattr(job.spec, "elastic", None)
    if e is None or not e.enabled or (job.kind == "PyTorchTrainingJob" and not _torchrun(job)):
        return None
    return e


def _ranks(rule: dict[str, list[Any]]) -> dict[str, tuple[int, ...]]:
    return {t: tuple(int(r) for r in ranks) for t, ranks in rule.items()}


def _number(notes: Mapping[str, Any], key: str, name: str) -> int:
    value = notes.get(key)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise ValueError(f"PodTemplate {name}: annotation {key} is {value!r}, not a number")
    return int(value)


def gated(pod: Mapping[str, Any]) -> bool:
    """Whether a pod, or a template's pod, carries flatjob's release gate (trimmed templates say so)."""
    if "gated" in pod:
        return bool(pod["gated"])
    spec = pod.get("spec")
    return isinstance(spec, Mapping) and any(isinstance(g, Mapping) and g.get("name") == keys.RELEASE_GATE for g in spec.get("schedulingGates") or [])


def restart_policy(pod: Mapping[str, Any]) -> str | None:
    """A template's pod's restartPolicy (trimmed templates keep it beside their spec's bytes)."""
    spec = pod.get("spec")
    return pod.get("restartPolicy") if "gated" in pod else spec.get("restartPolicy") if isinstance(spec, Mapping) else None


def pod_spec(template: Mapping[str, Any], kind: str, job: str) -> PodSpecView:
    """One PodTemplate of job `job` (a `kind`) as the decisions see its pod (ValueError when it
    was edited out of shape)."""
    meta = template.get("metadata") or {}
    name = meta.get("name")
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    pod_meta = (template.get("template") or {}).get("metadata") or {}
    pod_notes = pod_meta.get("annotations") or {}
    pod_labels = pod_meta.get("labels") or {}
    for key, want in ((keys.JOB_NAME, job), (keys.JOB_KIND, kind)):
        if pod_labels.get(key) != want:
            # Its pod would fall outside the job's pods (watched and indexed by these labels):
            # never seen to exist, so created again and again, never seen to end.
            raise ValueError(f"PodTemplate {name}: its pod is not labelled {key}={want}, so the runtime could not watch it")
    rtype, spec_hash = labels.get(keys.REPLICA_TYPE), pod_notes.get(keys.SPEC_HASH)
    if not isinstance(name, str) or not isinstance(rtype, str) or not isinstance(spec_hash, str):
        raise ValueError(f"PodTemplate {name}: no {keys.REPLICA_TYPE} label or {keys.SPEC_HASH} annotation")
    oversize = (template.get("template") or {}).get("oversize")
    if oversize:
        raise ValueError(f"PodTemplate {name}: its pod is {oversize:,} bytes, more than the {TEMPLATE_BYTES:,} flatjob renders; it was not written by flatjob compile")
    if not gated(template.get("template") or {}):
        raise ValueError(f"PodTemplate {name}: its pod has no {keys.RELEASE_GATE} scheduling gate, so it would run before its gang exists")
    policy = restart_policy(template.get("template") or {})
    if policy != "Never":  # the API server defaults an unset one to Always
        raise ValueError(f"PodTemplate {name}: its pod's restartPolicy is {str(policy or 'Always')[:40]!r}, not 'Never', so its kubelet would restart the program in place, "
                         "unseen by the job's restart policy, its limits and its status")
    seat = _number(notes, keys.SEAT, name) if keys.SEAT in notes else None
    container = notes.get(keys.TRAINING_CONTAINER)
    return PodSpecView(
        name, rtype, _number(labels, keys.REPLICA_INDEX, name), _number(notes, keys.RANK, name), _number(notes, keys.WAVE, name), seat, spec_hash,
        container if isinstance(container, str) else None,
    )


def expected_pods(job: Any) -> PodNames:
    """The names of the PodTemplates (so pods) the record's spec renders: the only ones the
    runtime reads (compiler.podset, as compile names them)."""
    runs, singles = template_runs(job)
    return PodNames.of(runs, singles)


def admitted_pods(record: Mapping[str, Any] | None) -> PodNames:
    """expected_pods of a record, or no name at all when the record is absent or unreadable
    (it is refused elsewhere, with its reason)."""
    if record is None:
        return NO_NAMES
    try:
        return expected_pods(typed_job(record))
    except Exception:
        return NO_NAMES


def _pods(record: Mapping[str, Any], templates: Mapping[str, Any], names: PodNames = NO_NAMES) -> tuple[tuple[PodSpecView, ...], str | None]:
    """The pods in rank order, and why they cannot be used yet (templates out of step; `names`:
    the pods the record names, to list the first missing ones)."""
    expected = ((record.get("metadata") or {}).get("annotations") or {}).get(keys.POD_TEMPLATES)
    try:
        job = str((record.get("metadata") or {}).get("name"))
        pods = sorted((pod_spec(t, str(record.get("kind")), job) for t in templates.values()), key=lambda p: (p.rank, p.name))
    except ValueError as exc:
        return (), f"waiting for the job's PodTemplates: {exc}"
    if templates_digest([p.name for p in pods]) != expected:
        have = len(pods)
        want = str(expected).split(":", 1)[0]
        missing = [n for n, _ in zip((n for n in names if n not in templates), range(MISSING_SHOWN), strict=False)]
        # A job of another kind and this name, from another folder, renders PodTemplates of the
        # same names: applied after this job's, they are labelled for it (namesakes.py).
        why = (f"; not found with its labels ({keys.JOB_KIND}={record.get('kind')}): {', '.join(missing)} "
               f"(not applied yet, deleted, or rendered by a job of another kind named {job}, from another folder)") if missing else ""
        return tuple(pods), f"waiting for the job's PodTemplates to match the record ({have} present, {want} expected){why}"
    return tuple(pods), None


def _unplanned(job: str, names: PodNames, pods: tuple[PodSpecView, ...]) -> tuple[NamedPod, ...]:
    """The pods `names` (the record's) holds that `pods` (its PodTemplates' view) lacks, by type
    and index: a ColossalAI launcher's single name, else `<job>-<type>-<index>`."""
    planned = {p.name for p in pods}
    single = [NamedPod(n, "launcher", 0) for n in sorted(names.singles) if n not in planned]
    runs = [NamedPod(f"{prefix}{i}", prefix[len(job) + 1 : -1], i) for prefix, count in names.runs for i in range(count) if f"{prefix}{i}" not in planned]
    return (*single, *runs)


def _labelled(templates: Mapping[str, Any], key: str) -> bool:
    """Whether the pods of these templates carry the label (a gang scheduler's group)."""
    return any(key in (((t.get("template") or {}).get("metadata") or {}).get("labels") or {}) for t in templates.values())


def _in_gang(templates: Mapping[str, Any]) -> bool:
    """Whether the pods belong to a gang scheduler's group: T9k's, Kueue's, coscheduling's (a
    label) or Volcano's (an annotation), whether flatjob or the template set it."""
    for t in templates.values():
        meta = (t.get("template") or {}).get("metadata") or {}
        if any(k in (meta.get("labels") or {}) for k in keys.GANG_LABELS) or any(k in (meta.get("annotations") or {}) for k in keys.GANG_ANNOTATIONS):
            return True
    return False


def _ssh_secret(kind: str, name: str, notes: Mapping[str, Any], own: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The SSH Secret the job's pods mount, and whether it is the author's own
    (flatjob.dev/ssh-secret): read off the job's PodTemplates, which decide what a pod mounts.
    The record's annotation is anyone's who may update the record: naming `<job>-ssh` there made
    the runtime release pods on a Secret someone else made, never refused (hx22). Until a
    template is there, the record's word (no pod is created or released without one).

    The Secret is the one the templates' pods mount (their `flatjob-ssh` volume, trim.ssh_secrets),
    not the one an annotation names: templates an older flatjob compiled carry no annotation
    (a job naming `mine` had the runtime vouch for `<job>-ssh`, which no pod mounted, and refuse
    a planted one for ever), and an annotation naming another Secret than the pods mount made
    the runtime check that one and release every pod on a planted `<job>-ssh`. A pod mounting
    `<job>-ssh` trusts it only as the runtime's own, unless the templates name that very Secret
    as the author's; templates that mount no SSH volume (hand-made) fall back to the annotation."""
    if kind not in SSH_KINDS:
        return None, False
    default = f"{name}-ssh"
    if not own:
        named = notes.get(keys.SSH_SECRET)
        return (named if isinstance(named, str) and named else default), bool(named)
    facts = (((t.get("metadata") or {}).get("annotations") or {}).get(keys.SSH_SECRET) for t in own.values())
    names = {n for n in facts if isinstance(n, str) and n}
    mounted = {n for t in own.values() for n in _mounted(t)}
    if not mounted:
        return (min(names), True) if names else (default, False)
    if default in mounted:  # the one to vouch for: the runtime's own unless the author named it
        return default, default in names
    return min(mounted), True


def _mounted(template: Mapping[str, Any]) -> list[str]:
    """The SSH Secrets a PodTemplate's pod mounts (trimmed: kept by trim.template; whole: read)."""
    pod = template.get("template") or {}
    found = pod.get("sshSecrets")
    if found is None and isinstance(pod.get("spec"), dict):
        found = ssh_secrets(pod["spec"])
    return list(found or ())


def job_view(record: Mapping[str, Any], templates: Mapping[str, Any]) -> JobView:
    """Everything the decisions need from a record and its PodTemplates."""
    job, dropped = _typed(record)
    meta = record.get("metadata") or {}
    notes = meta.get("annotations") or {}
    names = expected_pods(job)  # only templates of the job's own pod names count: others with its labels are anyone's
    own = {n: t for n, t in templates.items() if n in names}
    pods, problem = _pods(record, own, names)
    e = _elastic(job)
    target = min_nodes = None
    if e is not None:
        min_nodes = e.min_replicas
        want = e.expected_replicas or e.max_replicas
        target = max(e.min_replicas or 1, min(want, e.max_replicas))
    run_policy = getattr(job.spec, "run_policy", None)
    generic = job.kind == "GenericJob"
    ssh = _ssh_secret(job.kind, job.metadata.name, notes, own)
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
        run_mode=notes.get(keys.RUN_MODE) or "immediate",
        target=target,
        min_nodes=min_nodes,
        ssh_secret=ssh[0],
        ssh_secret_named=ssh[1],
        podgroup=_labelled(own, keys.T9K_GROUP_NAME),
        gang=_in_gang(own),
        launcher_kind=_launcher(job),
        version=notes.get(keys.VERSION),
        tensorboard=notes.get(keys.TENSORBOARD),
        problem=problem,
        unplanned=_unplanned(job.metadata.name, names, pods) if problem else (),
        ignored=tuple(dropped),
    )
