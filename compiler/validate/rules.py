"""Cross-field rules the models cannot express, each reported at the line that breaks it.

Every rule is a function (job, doc) -> iterable of Diagnostics; RULES maps each kind to the
rules that apply to it, so adding a rule is one function plus one table entry.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ..errors import Diagnostic, Severity
from ..jobtypes import ColossalAIJob, DeepSpeedJob, GenericJob, PyTorchTrainingJob
from ..limits import DEFAULT as DEFAULT_LIMITS
from ..loader import Document, PathT, format_path
from ..plan import deepspeed as deepspeed_plan
from ..plan import scripts as scripts_plan
from ..plan import ssh as ssh_plan
from ..plan.common import elastic_of, resume_entries
from ..podset import object_names, pod_counts, pod_total
from ..podtemplate import accelerator_count, containers_of, launch_index, training_index
from ..substitution import Context, RefError, distinct_refs, is_ours, iter_refs, resolve
from . import apivalues, launchers, names, podparts, podshape, podspec, tensorboardpod
from .groups import groups
from .suggest import did_you_mean

Rule = Callable[[Any, Document], Iterable[Diagnostic]]

DEEPSPEED_RESERVED = ("/root/.deepspeed_env",)
# What flatjob mounts in an SSH kind's pods (plan/ssh.volume_mounts, the ssh folder aside): a
# volume of the job at one of them is a second mount at the path, which the API server refuses
# ("must be unique"), or, written otherwise (`/flatjob/`), hides flatjob's scripts (hx13).
_RESERVED_USE = {
    scripts_plan.CONFIG_DIR: "its scripts (the job's ConfigMap)",
    scripts_plan.HOSTFILE: "the hostfile",
    "/root/.deepspeed_env": "the DeepSpeed env file",
}
# sshd splits AuthorizedKeysFile (where the keys in ssh.authMountPath are found) at whitespace and
# expands % tokens and ${VAR} in it: an absolute path of plain characters is found as written.
SSH_DIR = re.compile(r"/[A-Za-z0-9_@+=:,./-]*")
DEEPSPEED_CONFLICTS = {
    "--no_local_rank": "set spec.config.localRank: false instead",
    "--autotuning": "set spec.config.autotune instead",
    "--module": "use spec.config.run.module instead",
    "--no_python": "use spec.config.run.exec instead",
    "--hostfile": "flatjob provides the hostfile at /t9k/hostfile",
    "-H": "flatjob provides the hostfile at /t9k/hostfile",
}
# torchrun --nproc_per_node takes a number or one of these words (torch >= 1.13, distributed/run.py);
# flatjob resolves 'gpu' to the container's GPU limit and passes the others on.
PROC_PER_NODE_WORDS = ("gpu", "cpu", "auto")
_T9K_PVC_URL = re.compile(r"t9k://pvc/([^/]+)(/.*)?")
_T9K_MINIO_URL = re.compile(r"t9k://minio/[^/]+/[^/]+(/.*)?")  # t9k://minio/<secret>/<bucket>/<path>
# $(service...[$(rank)]...): ours, with another $( before it closes; $$( is an escape.
_NESTED_REF = re.compile(r"(?<!\$)\$\((?=(?:service|replicas)[^()]*\$\()")
MAX_REFS = 1000  # distinct $(...) references checked in one value
MAX_REF_FINDINGS = 10  # findings about the references of one value
_UNCLOSED_REF = re.compile(r"(?<!\$)\$\((?:type|rank|replicas|service)[^()]*$")


# --- helpers -----------------------------------------------------------------------------


def _decimal(text: str) -> bool:
    """Whether text is a plain decimal int64 ("12"); str.isdigit also accepts "²" and "٣"."""
    return text.isascii() and text.isdigit() and len(text) <= 18


# --- rules for every kind ----------------------------------------------------------------


def job_name(job: Any, doc: Document) -> Iterator[Diagnostic]:
    why = names.dns1035_label(job.metadata.name)
    if why:
        near = names.label_suggestion(job.metadata.name, letter_first=True)
        yield doc.diagnostic("FJ305", f"job name {job.metadata.name!r} {why}", ("metadata", "name"), hint=f"did you mean {near!r}?" if near else None)


def job_namespace(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """A namespace is a DNS-1123 label; it is also a folder of the output (never `..` or `/`)."""
    ns = job.metadata.namespace
    why = names.dns1123_label(ns) if ns is not None else None
    if why:
        yield doc.diagnostic("FJ305", f"namespace {ns!r} {why}", ("metadata", "namespace"))


def planned_pods(job: Any) -> tuple[int, PathT]:
    """How many pods the job renders, and the field that asks for the most of them."""
    elastic = elastic_of(job)
    if elastic is not None and elastic.max_replicas:
        return pod_total(job), ("spec", "elastic", "maxReplicas")
    biggest = max(groups(job), key=lambda g: g.replicas, default=None)
    where = (*biggest.path, "replicas") if biggest is not None and biggest.template is not None else ("spec",)
    return pod_total(job), where


def job_size(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """At most limits.job_pods pods per job: a number in a pull request must not exhaust memory."""
    total, where = planned_pods(job)
    if total > DEFAULT_LIMITS.job_pods:
        yield doc.diagnostic("FJ105", f"the job renders {total:,} pods, more than the {DEFAULT_LIMITS.job_pods:,} flatjob renders for one job", where, hint="split it into several jobs")
    types = list(groups(job))
    if len(types) > DEFAULT_LIMITS.job_types:
        yield doc.diagnostic("FJ105", f"the job has {len(types):,} replica types, more than the {DEFAULT_LIMITS.job_types} flatjob runs in one job (each is a task in the record's status)",
                             types[DEFAULT_LIMITS.job_types].path, hint="give replicas of the same template one type, or split the job")


def metadata_labels(job: Any, doc: Document) -> Iterator[Diagnostic]:
    yield from _label_map(doc, ("metadata", "labels"), job.metadata.labels, values=True)
    yield from _label_map(doc, ("metadata", "annotations"), job.metadata.annotations, values=False)
    for g in groups(job):
        meta = (g.template or {}).get("metadata") if isinstance(g.template, dict) else None
        if isinstance(meta, dict):
            for field, values in (("labels", True), ("annotations", False)):
                if isinstance(meta.get(field), dict):
                    yield from _label_map(doc, (*g.template_path, "metadata", field), meta[field], values=values)


def _label_map(doc: Document, path: PathT, mapping: dict[str, Any], *, values: bool) -> Iterator[Diagnostic]:
    for key, value in mapping.items():
        why = names.qualified_key(key)
        if why:
            yield doc.diagnostic("FJ313", f"key {key!r}: {why}", (*path, key), key=True)
        if values and isinstance(value, str):
            why = names.label_value(value)
            if why:
                yield doc.diagnostic("FJ313", f"label value {value!r}: {why}", (*path, key))
    if not values:  # what flatjob adds to each object is counted with it by the budget (budget.oversized)
        total = names.annotations_size(mapping)
        if total > names.ANNOTATIONS_BYTES:
            yield doc.diagnostic("FJ313", f"annotations of {total:,} bytes; the API server takes at most {names.ANNOTATIONS_BYTES:,} in one object", path, key=True, hint="keep large data out of annotations")


# What a rendered object's name must be (apimachinery validation): a pod's name is its hostname
# (a DNS-1123 label, as the compiler renders it), a Service's a DNS-1035 label.
_NAME_RULES = {"PodTemplate": ("pod name", names.dns1123_label), "Service": ("Service name", names.dns1035_label)}
_NAME_HINTS = {
    "PodTemplate": "pod names are <job>-<type>-<index>; shorten the job name or the type",
    "Service": "the TensorBoard Service is <job>-tensorboard: shorten the job name",
}


def _name_hint(kind: str, why: str, job_name: str, name: str) -> str:
    """How to fix a derived name: shorten it when too long; else (a valid job name, so the replica
    type is at fault: 'Worker') the type the user likely meant, not "shorten" (issue 25)."""
    if kind != "PodTemplate" or len(name) > names.MAX_LABEL:
        return _NAME_HINTS[kind]
    kind_type = name[len(job_name) + 1 : name.rfind("-")]
    near = names.label_suggestion(kind_type)
    return "pod names are <job>-<type>-<index>: write the type in lower-case letters, digits and '-'" + (f"; did you mean {near!r}?" if near else "")


def rendered_names(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """FJ305 where a name flatjob derives (pods, Services) is not one the API server accepts;
    the longest name of each field is checked, once."""
    if names.dns1035_label(job.metadata.name):
        return  # reported once, by job_name
    longest: dict[tuple[str, PathT], str] = {}
    for kind, name, path in object_names(job):
        if len(name) >= len(longest.get((kind, path), "")):
            longest[(kind, path)] = name
    for (kind, path), name in longest.items():
        what, rule = _NAME_RULES[kind]
        why = rule(name)
        if why:
            where = path if tuple(path) in doc.value_marks or tuple(path) in doc.key_marks else ("metadata", "name")
            yield doc.diagnostic("FJ305", f"{what} {name!r} {why}", where, key=where == ("spec", "tensorboardSpec"), hint=_name_hint(kind, why, job.metadata.name, name))


def unique_types(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """Each replica type once, and one that can be a label value: flatjob labels every pod with
    it (flatjob.dev/replica-type, app.kubernetes.io/component), so `-w` makes a valid pod name
    (`x--w-0`) but labels the API server refuses."""
    specs = getattr(job.spec, "replica_specs", None) or []
    seen: dict[str, int] = {}
    for i, r in enumerate(specs):
        why = names.label_value(r.type)
        if why:
            yield doc.diagnostic("FJ305", f"replica type {r.type!r} is a label value of every pod: it {why}", ("spec", "replicaSpecs", i, "type"))
        if r.type in seen:
            yield doc.diagnostic("FJ303", f"replica type {r.type!r} is already used by spec.replicaSpecs[{seen[r.type]}]", ("spec", "replicaSpecs", i, "type"))
        else:
            seen[r.type] = i


def run_mode(job: Any, doc: Document) -> Iterator[Diagnostic]:
    mode = job.spec.run_mode
    if mode is None:
        return
    if mode.debug and mode.debug.enabled and mode.pause and mode.pause.enabled:
        yield doc.diagnostic("FJ307", "debug and pause mode are both enabled; enable one", ("spec", "runMode", "pause", "enabled"))
    types = [g.type for g in groups(job)]
    for section, entries, field in (("debug", mode.debug, "replicaSpecs"), ("pause", mode.pause, "resumeSpecs")):
        items = getattr(entries, "replica_specs", None) if section == "debug" else getattr(entries, "resume_specs", None)
        seen: set[str] = set()
        for i, entry in enumerate(items or []):
            path = ("spec", "runMode", section, field, i, "type")
            if entry.type not in types:
                yield doc.diagnostic("FJ306", f"no replica type {entry.type!r} in this job (types: {', '.join(types)})", path, hint=did_you_mean(entry.type, types))
            elif entry.type in seen:
                yield doc.diagnostic("FJ303", f"{entry.type!r} appears twice in runMode.{section}.{field}", path)
            seen.add(entry.type)


FLATJOB_ANNOTATIONS = {
    "flatjob.dev/scheduler": ("auto", "t9k", "kueue", "default"),
}


def flatjob_annotations(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """flatjob.dev/* annotations on the job configure flatjob: check their values."""
    notes = job.metadata.annotations
    base = ("metadata", "annotations")
    for key, allowed in FLATJOB_ANNOTATIONS.items():
        value = notes.get(key)
        if value is not None and value not in allowed:
            yield doc.diagnostic("FJ204", f"{key}: {value!r} is not one of {', '.join(allowed)}", (*base, key), hint=did_you_mean(value, allowed))
    if notes.get("flatjob.dev/scheduler") == "kueue":
        sched = getattr(job.spec, "scheduler", None)
        if not notes.get("flatjob.dev/kueue-queue") and not (sched is not None and sched.t9k_scheduler is not None):
            yield doc.diagnostic("FJ203", "the kueue scheduler target needs a queue: set flatjob.dev/kueue-queue or spec.scheduler.t9kScheduler.queue", (*base, "flatjob.dev/scheduler"))
    queue = notes.get("flatjob.dev/kueue-queue")
    # Checked where it may become the label: Kueue chosen here, or no choice here (compile's
    # --scheduler decides, which lint cannot see); a job that picks another target never uses it.
    kueue_possible = notes.get("flatjob.dev/scheduler") in (None, "kueue")
    if queue and kueue_possible and names.kueue_queue(queue):  # "" is unset: the option or the T9k queue names it
        yield doc.diagnostic("FJ313", f"flatjob.dev/kueue-queue: {queue!r} becomes the label kueue.x-k8s.io/queue-name, naming a LocalQueue: it {names.kueue_queue(queue)}", (*base, "flatjob.dev/kueue-queue"))
    secret = notes.get("flatjob.dev/ssh-secret")
    if secret is not None and names.dns1123_label(secret):
        yield doc.diagnostic("FJ313", f"flatjob.dev/ssh-secret: {secret!r} {names.dns1123_label(secret)}", (*base, "flatjob.dev/ssh-secret"))


def resume_specs(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """resumeSpecs work by wrapping the container's command; without one there is nothing to wrap."""
    entries = resume_entries(job.spec.run_mode)
    by_type = {g.type: g for g in groups(job)} if entries else {}
    for i, entry in enumerate(entries):
        g = by_type.get(entry.type)
        if g is None or g.template is None:
            continue
        idx = training_index(job.kind, g.template)
        cs = containers_of(g.template)
        path = ("spec", "runMode", "pause", "resumeSpecs", i)
        changes = "command" if entry.command is not None else "args" if entry.args is not None else None
        if changes and idx is not None and not cs[idx].get("command") and job.kind in ("GenericJob", "PyTorchTrainingJob"):
            # The wrapper runs `command args` or the resumeSpec's: with no command the usual run
            # would be an empty `exec` (exit 0: the job "succeeds") or its first arg as a program.
            yield doc.diagnostic(
                "FJ318", f"resumeSpecs for {entry.type!r} set {changes}, but the container has no command: it runs its image's entrypoint, which flatjob cannot wrap",
                (*path, changes), key=True, hint="give the container its command (the image's entrypoint, written out)",
            )
        if entry.skip_init_container:
            inits = ((g.template.get("spec") or {}).get("initContainers") or []) if isinstance(g.template, dict) else []
            for c in inits:
                if isinstance(c, dict) and not c.get("command"):
                    yield doc.diagnostic("FJ318", f"init container {c.get('name')!r} has no command, so it cannot be skipped on resume", (*path, "skipInitContainer"), severity=Severity.WARNING)


def has_pods(job: Any, doc: Document) -> Iterator[Diagnostic]:
    if sum(pod_counts(job).values()) == 0 and not isinstance(job, ColossalAIJob):
        yield doc.diagnostic("FJ314", "every replica count is 0: the job would create no pods", ("spec",), key=True, severity=Severity.WARNING)


def has_containers(job: Any, doc: Document) -> Iterator[Diagnostic]:
    for g in groups(job):
        if g.template is not None and not containers_of(g.template):
            yield doc.diagnostic("FJ310", "the pod template has no containers (template.spec.containers)", g.template_path, key=True)


def template_restart_policy(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """A pod template's restartPolicy other than Never is overridden (T9k's API references:
    "RestartPolicy in PodTemplateSpec will always be set to Never"); T9k's own DeepSpeed and
    ColossalAI examples write OnFailure there, so say where restarts are set instead."""
    for g in groups(job):
        spec = g.template.get("spec") if isinstance(g.template, dict) else None
        policy = spec.get("restartPolicy") if isinstance(spec, dict) else None
        if policy not in ("OnFailure", "Always"):  # Never, or a value the API server refuses anyway (FJ402)
            continue
        where = "ColossalAI pods are never restarted" if job.kind == "ColossalAIJob" else f"restarts follow {format_path((*g.path, 'restartPolicy'))}"
        yield doc.diagnostic(
            "FJ344", f"the pod's restartPolicy is always Never (as in T9k), so {policy!s} here does nothing; {where}",
            (*g.template_path, "spec", "restartPolicy"), key=True, severity=Severity.WARNING, hint="remove template.spec.restartPolicy",
        )


PROBES_THAT_KILL = ("livenessProbe", "startupProbe")  # a readinessProbe only marks the pod not Ready


def probes_end_replicas(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """The kubelet kills a container whose liveness or startup probe fails (SIGTERM, then
    SIGKILL after the grace; kuberuntime_manager.go computePodActions) and, the pod's
    restartPolicy being Never, starts it no more: the replica ends there, judged by the
    program's exit code as if it had ended by itself (a checkpoint and exit 0 reads as a
    success), as under T9k; nothing in the pod's status tells the two apart, only a Killing
    Event (review 23, round 15)."""
    for g in groups(job):
        spec = g.template.get("spec") if isinstance(g.template, dict) else None
        items = spec.get("containers") if isinstance(spec, dict) else None
        for i, c in enumerate(items if isinstance(items, list) else []):
            for probe in (p for p in PROBES_THAT_KILL if isinstance(c, dict) and p in c):
                yield doc.diagnostic(
                    "FJ348", f"a failed {probe} ends this replica for good (every pod's restartPolicy is Never): the kubelet stops the container and "
                    "its exit code decides as if the program had ended by itself, so one that exits 0 on SIGTERM counts as a success",
                    (*g.template_path, "spec", "containers", i, probe), key=True, severity=Severity.WARNING,
                    hint="catch a hung training inside the program (NCCL's timeout, a watchdog that exits non-zero) or with activeDeadlineSeconds",
                )


def container_images(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """Every container needs an image: the API server requires it, the OpenAPI schema does not."""
    for g in groups(job):
        spec = g.template.get("spec") if isinstance(g.template, dict) else None
        for field in ("initContainers", "containers"):
            items = spec.get(field) if isinstance(spec, dict) else None
            for i, c in enumerate(items if isinstance(items, list) else []):
                if isinstance(c, dict) and c.get("image") in (None, ""):
                    where = (*g.template_path, "spec", field, i, *(("image",) if "image" in c else ()))
                    name = f" {c['name']!r}" if isinstance(c.get("name"), str) else ""
                    yield doc.diagnostic(
                        "FJ403", f"container{name} has no image; the API server rejects a pod without one", where,
                        hint="add image: <registry>/<repository>:<tag>",
                    )


def elastic_range(job: Any, doc: Document) -> Iterator[Diagnostic]:
    e = elastic_of(job)  # an elastic config that is ignored (FJ302) is not checked
    if e is None:
        return
    base = ("spec", "elastic")
    for field, value in (("minReplicas", e.min_replicas), ("maxReplicas", e.max_replicas)):
        if value is None:
            yield doc.diagnostic("FJ301", f"elastic mode needs spec.elastic.{field}", base, key=True)
    lo, hi = e.min_replicas, e.max_replicas
    if lo is not None and hi is not None and lo > hi:
        yield doc.diagnostic("FJ301", f"minReplicas ({lo}) is greater than maxReplicas ({hi})", (*base, "minReplicas"))
    want = e.expected_replicas
    if want is not None and lo is not None and want < lo:
        yield doc.diagnostic("FJ301", f"expectedReplicas ({want}) is below minReplicas ({lo})", (*base, "expectedReplicas"))
    if want is not None and hi is not None and want > hi:
        yield doc.diagnostic("FJ301", f"expectedReplicas ({want}) is above maxReplicas ({hi})", (*base, "expectedReplicas"))


# --- PyTorchTrainingJob ------------------------------------------------------------------


def elastic_needs_torchrun(job: PyTorchTrainingJob, doc: Document) -> Iterator[Diagnostic]:
    """T9k ignores elastic without torchrun ("effective only in torchrun mode"); so does flatjob."""
    e = job.spec.elastic
    if e is not None and e.enabled and elastic_of(job) is None:
        yield doc.diagnostic(
            "FJ302", "spec.elastic is ignored without torchrun: the job runs the replicas of its replicaSpecs, not an elastic range",
            ("spec", "elastic", "enabled"), severity=Severity.WARNING, hint="set spec.torchrunConfig.enabled: true to train elastically",
        )


def _devices(container: dict[str, Any]) -> bool:
    """Whether a container asks for an extended resource (a device: nvidia.com/gpu, a MIG slice...)."""
    res = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    return any(isinstance(section, dict) and any("/" in str(k) for k in section) for section in (res.get("limits"), res.get("requests")))


def torchrun_fields(job: PyTorchTrainingJob, doc: Document) -> Iterator[Diagnostic]:
    tr = job.spec.torchrun_config
    if tr is None:
        return
    base = ("spec", "torchrunConfig")
    ppn = tr.proc_per_node
    if not (ppn in PROC_PER_NODE_WORDS or (_decimal(ppn) and int(ppn) >= 1)):
        words = ", ".join(repr(w) for w in PROC_PER_NODE_WORDS)
        yield doc.diagnostic("FJ308", f"procPerNode {ppn!r} must be a positive integer (as a string) or one of {words}", (*base, "procPerNode"), hint=did_you_mean(ppn, PROC_PER_NODE_WORDS))
    if tr.min_nodes is not None:
        yield doc.diagnostic("FJ206", "torchrunConfig.minNodes is not used; the node range comes from spec.elastic", (*base, "minNodes"), key=True, severity=Severity.WARNING)
    if not tr.enabled:
        return
    for g in groups(job):
        idx = training_index(job.kind, g.template)
        if idx is None:
            continue
        container = containers_of(g.template)[idx]
        args, command = container.get("args"), container.get("command")
        path = (*g.template_path, "spec", "containers", idx)
        if ppn == "gpu" and not _devices(container):  # T9k: "as many processes as the replica's GPUs", here none
            yield doc.diagnostic(
                "FJ308", f"procPerNode 'gpu', but {g.type}'s training container asks for no GPU (no extended resource such as nvidia.com/gpu): torchrun refuses 'gpu' where CUDA is not available",
                (*base, "procPerNode"), severity=Severity.WARNING, hint="give the container its GPU limit, or set procPerNode to a number",
            )
        if not args:
            yield doc.diagnostic(
                "FJ316", "torchrun mode runs `torchrun <options> <args>`: the training container needs the script in args",
                path, key=True, hint="move the script from command to args, e.g. command: [python], args: [train.py, ...]",
            )
        elif isinstance(command, list) and (dropped := _dropped_by_torchrun(command)):
            yield doc.diagnostic(
                "FJ316", f"torchrun mode ignores the container's command (T9k): {' '.join(w if isinstance(w, str) else json.dumps(w) for w in dropped)!r} is not run, only args are",
                (*path, "command"), severity=Severity.WARNING, hint="move it into args, e.g. command: [python], args: [train.py, ...]",
            )
    if tr.rdzv_backend != "c10d" and not _flags_given(tr.extra_options, "--rdzv_endpoint"):
        yield doc.diagnostic(
            "FJ319", f"rdzvBackend {tr.rdzv_backend} uses your etcd server, but extraOptions names none: torchrun would look for etcd at the master pod",
            (*base, "rdzvBackend"), severity=Severity.WARNING, hint="add --rdzv_endpoint=<etcd-host>:<port> to spec.torchrunConfig.extraOptions",
        )


_INTERPRETER = re.compile(r"(?:.*/)?python(?:\d+(?:\.\d+)?)?")


def _dropped_by_torchrun(command: list[Any]) -> list[Any]:
    """What of a command torchrun mode drops beyond the documented `command: [python]`."""
    if command and isinstance(command[0], str) and _INTERPRETER.fullmatch(command[0]):
        return command[1:]
    return command


def _flags_given(options: list[str], flag: str) -> bool:
    """Whether torchrun options set `flag` (either spelling, `--f=v` or `--f v`)."""
    spellings = {flag, flag.replace("_", "-")}
    return any(o.partition("=")[0] in spellings for o in options)


def tensorboard(job: PyTorchTrainingJob, doc: Document) -> Iterator[Diagnostic]:
    """Log locations: t9k://pvc is mounted; T9k's MinIO, S3 and HTTP sources are not (FJ321)."""
    tb = job.spec.tensorboard_spec
    if tb is None:
        return
    base = ("spec", "tensorboardSpec")
    unmounted = "flatjob mounts only PVCs (T9k's TensorBoard operator reads the others)"
    for i, url in enumerate(tb.training_log_filesets):
        if _T9K_MINIO_URL.fullmatch(url):
            yield doc.diagnostic("FJ321", f"log location {url!r} is not shown: {unmounted}", (*base, "trainingLogFilesets", i), severity=Severity.WARNING, hint="copy the logs to a PVC and name it t9k://pvc/<pvc>/<path>")
        elif not _T9K_PVC_URL.fullmatch(url):
            yield doc.diagnostic("FJ317", f"log location {url!r} is not of the form t9k://pvc/<pvc>/<path>", (*base, "trainingLogFilesets", i))
    log_dir = tb.log_dir
    for source in ("s3", "http"):
        if log_dir is not None and getattr(log_dir, source) is not None:
            yield doc.diagnostic("FJ321", f"logDir.{source} is not shown: {unmounted}", (*base, "logDir", source), key=True, severity=Severity.WARNING, hint="use logDir.pvc")
    has_pvc = any(_T9K_PVC_URL.fullmatch(u) for u in tb.training_log_filesets) or (log_dir is not None and bool(log_dir.pvc))
    if not has_pvc:
        yield doc.diagnostic(
            "FJ321", "tensorboardSpec names no PVC log location, so flatjob renders no TensorBoard", base, key=True,
            severity=Severity.WARNING, hint="add logDir.pvc: [{name: <pvc>, subPath: [<path>]}]",
        )


# --- DeepSpeedJob ------------------------------------------------------------------------


def deepspeed_run(job: DeepSpeedJob, doc: Document) -> Iterator[Diagnostic]:
    cfg = job.spec.config
    base = ("spec", "config")
    run = cfg.run
    given = [name for name in ("python", "module", "exec") if run is not None and getattr(run, name) is not None]
    if cfg.custom_command is not None:
        if given:
            yield doc.diagnostic("FJ300", "config.run is ignored because customCommand is set", (*base, "run"), key=True, severity=Severity.WARNING)
        return
    if not given:
        where = (*base, "run") if run is not None else base
        yield doc.diagnostic("FJ300", "config.run needs exactly one of python, module or exec", where, key=True)
    elif len(given) > 1:
        yield doc.diagnostic("FJ300", f"config.run sets {' and '.join(given)}; set exactly one", (*base, "run", given[1]), key=True)
    debugging = job.spec.run_mode is not None and job.spec.run_mode.debug is not None and job.spec.run_mode.debug.enabled
    for name in given:
        if not getattr(run, name) and not debugging:  # debug mode never runs the program
            yield doc.diagnostic("FJ300", f"config.run.{name} is empty; give the program and its args", (*base, "run", name))


def deepspeed_slots(job: DeepSpeedJob, doc: Document) -> Iterator[Diagnostic]:
    """slotsPerWorker unset (1 process a worker) where the training container asks for more
    GPUs: T9k "normally" sets it to each replica's GPU count (UM deepspeedjob.md) and gives no
    default, and every multi-GPU DeepSpeedJob of T9k's examples sets it."""
    config = (doc.data.get("spec") or {}).get("config") if isinstance(doc.data, dict) and isinstance(doc.data.get("spec"), dict) else None
    if isinstance(config, dict) and "slotsPerWorker" in config:
        return
    template = job.spec.worker.template
    index = training_index(job.kind, template)
    gpus = accelerator_count(containers_of(template)[index]) if index is not None else None
    if gpus is not None and gpus > 1:
        yield doc.diagnostic(
            "FJ351", f"config.slotsPerWorker is not set, so every worker runs 1 training process (hostfile slots=1) while its container asks for {gpus} GPUs: {gpus - 1} of them stay idle",
            ("spec", "config") if isinstance(config, dict) else ("spec",), key=True, severity=Severity.WARNING,
            hint=f"set config.slotsPerWorker: {gpus} (T9k: usually each replica's GPU count)",
        )


def deepspeed_other_args(job: DeepSpeedJob, doc: Document) -> Iterator[Diagnostic]:
    args = job.spec.config.other_args
    for i, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in DEEPSPEED_CONFLICTS:
            yield doc.diagnostic("FJ311", f"{flag} in otherArgs conflicts with a field flatjob sets", ("spec", "config", "otherArgs", i), hint=DEEPSPEED_CONFLICTS[flag])
        elif flag == "--launcher":  # UM deepspeedjob.md: "目前 DeepSpeedJob 只支持 pdsh"
            value, at = launchers.flag_value(args, i)
            if (value or "").lower() != "pdsh":
                yield doc.diagnostic(
                    "FJ311", f"--launcher {value or '(no value)'} in otherArgs: DeepSpeedJob runs deepspeed's pdsh launcher only (T9k), over the hostfile and ssh flatjob sets up",
                    ("spec", "config", "otherArgs", at), hint="remove it: pdsh is the default",
                )


def _mounted(path: str) -> str:
    return path.rstrip("/") or "/"


def ssh_folder(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """ssh.authMountPath: a path sshd finds as written, and none of flatjob's other mounts;
    ssh.sshdPath: absolute."""
    path = job.spec.ssh.auth_mount_path
    where = ("spec", "ssh", "authMountPath")
    if not SSH_DIR.fullmatch(path):
        yield doc.diagnostic(
            "FJ204", f"ssh.authMountPath {path!r}: sshd reads the keys from an absolute path of plain characters only (it splits its AuthorizedKeysFile at spaces and expands % and ${{}} in it)",
            where, hint="use an absolute path of letters, digits and _@+=:,./-, such as /root/.ssh",
        )
    elif _mounted(path) in _RESERVED_USE and _mounted(path) != "/root/.deepspeed_env":
        yield doc.diagnostic("FJ309", f"ssh.authMountPath {path} is reserved: flatjob mounts {_RESERVED_USE[_mounted(path)]} there", where, hint="mount the SSH keys somewhere else, such as /root/.ssh")
    if not job.spec.ssh.sshd_path.startswith("/"):  # sshd re-executes itself by the path it was started with
        yield doc.diagnostic("FJ204", f"ssh.sshdPath {job.spec.ssh.sshd_path!r}: sshd refuses to start from a relative path", ("spec", "ssh", "sshdPath"), hint="use sshd's absolute path in the image, such as /usr/sbin/sshd")


# The volumes flatjob adds to an SSH kind's pods (plan/ssh.volumes): a job's volume of the same
# name is a second one, which the API server refuses ("Duplicate value"; hx13).
RESERVED_VOLUMES = {ssh_plan.CONFIG_VOLUME: "its scripts and the hostfile (the job's ConfigMap)", ssh_plan.SSH_VOLUME: "the SSH keys"}


def reserved_volumes(job: Any, doc: Document) -> Iterator[Diagnostic]:
    for g in groups(job):
        spec = g.template.get("spec") if g.template is not None else None
        volumes = spec.get("volumes") if isinstance(spec, dict) else None
        for vi, v in enumerate(volumes if isinstance(volumes, list) else []):
            name = v.get("name") if isinstance(v, dict) else None
            if isinstance(name, str) and name in RESERVED_VOLUMES:
                yield doc.diagnostic(
                    "FJ309", f"volume name {name} is reserved: flatjob adds a volume of that name for {RESERVED_VOLUMES[name]}",
                    (*g.template_path, "spec", "volumes", vi, "name"), hint="name the volume otherwise (and its volumeMounts)",
                )


def reserved_paths(job: Any, doc: Document) -> Iterator[Diagnostic]:
    ssh = _mounted(job.spec.ssh.auth_mount_path)
    reserved = {_mounted(m["mountPath"]) for m in ssh_plan.volume_mounts(ssh)} | (set(DEEPSPEED_RESERVED) if isinstance(job, DeepSpeedJob) else set())
    for g in groups(job):
        for ci, c in enumerate(containers_of(g.template)):
            mounts = c.get("volumeMounts")
            for mi, m in enumerate(mounts if isinstance(mounts, list) else []):
                path = m.get("mountPath") if isinstance(m, dict) else None
                if isinstance(path, str) and _mounted(path) in reserved:
                    what = "the SSH keys" if _mounted(path) == ssh else _RESERVED_USE[_mounted(path)]
                    yield doc.diagnostic(
                        "FJ309", f"{path} is reserved: flatjob puts {what} there",
                        (*g.template_path, "spec", "containers", ci, "volumeMounts", mi, "mountPath"),
                        hint="mount the volume somewhere else",
                    )


# What the scripts of a job whose ssh.authMountPath is not /root/.ssh link into the .ssh of the
# homes the ssh clients read (plan/scripts.client_keys): root's passwd home, which OpenSSH reads
# (pods of the SSH kinds run as root, FJ342), and $HOME, which fabric reads.
PASSWD_HOME = "/root"
LINKED_KEYS = scripts_plan.LINKED_KEYS
# Volume sources the kubelet always mounts read-only, whatever the mount's readOnly says.
READ_ONLY_SOURCES = ("secret", "configMap", "projected", "downwardAPI")


def _literal_path(value: Any) -> bool:
    """A path the container gets as written: a string with no $(VAR) the kubelet expands."""
    return isinstance(value, str) and value != "" and "$(" not in value


def _homes(container: dict[str, Any]) -> list[tuple[str, str]]:
    """The homes whose .ssh the scripts link the keys into, with who reads each: root's passwd
    home, and the container's own HOME where its env gives a literal one.  A relative HOME is
    where the script runs, the container's workingDir (the scripts link into "$HOME/.ssh" before
    any cd): lint knows it when the workingDir is a literal absolute path, not the image's."""
    found = [(PASSWD_HOME, "OpenSSH (pdsh, a user's ssh) reads it whatever $HOME says")]
    env = container.get("env")
    wd = container.get("workingDir")
    for e in env if isinstance(env, list) else []:
        if isinstance(e, dict) and e.get("name") == "HOME":
            value = e.get("value")
            found = found[:1]  # the last entry of a name is the one the container gets
            if not _literal_path(value):
                continue  # unset or empty: the passwd home; $(VAR) or valueFrom: not known here
            reader = "fabric and paramiko read it ($HOME)"
            if not value.startswith("/"):
                if not (_literal_path(wd) and wd.startswith("/")):
                    continue  # from the image's WORKDIR, which lint does not see
                value, reader = posixpath.join(wd, value), f"fabric and paramiko read it ($HOME, {e['value']} in the workingDir {wd})"
            home = _mounted(posixpath.normpath(value))
            if home != PASSWD_HOME:
                found.append((home, reader))
    return found


def _read_only(mount: dict[str, Any], volumes: dict[str, Any]) -> bool:
    volume = volumes.get(mount.get("name"))
    return mount.get("readOnly") is True or (isinstance(volume, dict) and any(volume.get(k) is not None for k in READ_ONLY_SOURCES))


def ssh_home_mounts(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """FJ352: a volume of the job over the .ssh folder where the scripts link the keys of a
    custom ssh.authMountPath (or over a home, read-only).  Read-only (a Secret, a ConfigMap,
    `readOnly: true`), or at one of the linked files, the link cannot be made and the pod stops
    at start: an error.  Writable (a PVC, an emptyDir), the links replace the volume's own files
    of those names: a warning."""
    auth = _mounted(job.spec.ssh.auth_mount_path)
    if not scripts_plan.client_keys(auth):
        return
    for g in groups(job):
        index = launch_index(job.kind, g.type, g.template)
        spec = g.template.get("spec") if g.template is not None else None
        if index is None or not isinstance(spec, dict):
            continue
        container = containers_of(g.template)[index]
        volumes = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)} if isinstance(spec.get("volumes"), list) else {}
        mounts = container.get("volumeMounts")
        for mi, m in enumerate(mounts if isinstance(mounts, list) else []):
            path = m.get("mountPath") if isinstance(m, dict) else None
            if not isinstance(path, str) or not path.startswith("/"):
                continue
            where = (*g.template_path, "spec", "containers", index, "volumeMounts", mi, "mountPath")
            for home, reader in _homes(container):
                dot = f"{home.rstrip('/')}/.ssh"
                found = _ssh_home_mount(_mounted(path), home, dot, _read_only(m, volumes), reader, auth)
                if found is not None:
                    message, severity = found
                    yield doc.diagnostic("FJ352", f"volume {m.get('name')} at {path}: {message}", where, severity=severity,
                                         hint=f"mount the volume elsewhere, or the SSH keys at {dot} (ssh.authMountPath: {dot})")
                    break


def _ssh_home_mount(path: str, home: str, dot: str, read_only: bool, reader: str, auth: str) -> tuple[str, Severity] | None:
    """What a mount at `path` does to the links into `dot` (None: nothing)."""
    links = f"the pod's script links the SSH client config and key of ssh.authMountPath {auth} into {dot}, where {reader}"
    if path == dot and read_only:
        return f"{links}, but this volume is read-only there: the links cannot be made and every pod stops at start", Severity.ERROR
    if path == dot:
        return f"{links}: they replace this volume's own {', '.join(LINKED_KEYS)}", Severity.WARNING
    if path in {f"{dot}/{f}" for f in LINKED_KEYS}:
        return f"{links}, and a mounted file cannot be replaced by a link: every pod stops at start", Severity.ERROR
    if path == home and read_only:
        return f"{links}, but this read-only volume is that home: {dot} cannot be made and every pod stops at start", Severity.ERROR
    return None


# Environment variables that are configuration, not data, for what runs the job: flatjob's own
# scripts (FLATJOB_*: where sshd's ForceCommand, the kept environment and the hostfile are),
# and, in a DeepSpeedJob, deepspeed's and pdsh's (an env file of `export` lines it pastes into
# every node's shell, ssh options that run commands, modules it loads).  A job setting one
# would turn a value into shell source (review of round 14).
RESERVED_ENV_PREFIX = "FLATJOB_"
# A session's shell expands BASH_ENV and ENV and runs the file they name before the command an
# ssh client sent (session.sh unsets them; review of round 15).
SESSION_SHELL = ("BASH_ENV", "ENV")


@dataclass(frozen=True)
class LauncherEnv:
    """Names a kind's launcher reads as its configuration: exact names, name prefixes, and the
    replica types whose containers it runs in (None: every type)."""

    reader: str
    names: tuple[str, ...]
    prefixes: tuple[str, ...] = ()
    types: tuple[str, ...] | None = None

    def owns(self, name: str, rtype: str) -> bool:
        return (self.types is None or rtype in self.types) and (name in self.names or name.startswith(self.prefixes) if self.prefixes else name in self.names)


LAUNCHER_ENV: dict[type, tuple[LauncherEnv, ...]] = {
    DeepSpeedJob: (LauncherEnv("deepspeed and pdsh", deepspeed_plan.LAUNCHER_ENV, deepspeed_plan.LAUNCHER_ENV_PREFIXES),
                   LauncherEnv("the ssh sessions' shell", SESSION_SHELL)),
    # `colossalai run` uses fabric, which loads ~/.fabric.py (Python) and ~/.ssh/config (its
    # ProxyCommand runs) from $HOME (review of round 15)
    ColossalAIJob: (LauncherEnv("colossalai run's fabric", ("HOME",), types=("launcher",)), LauncherEnv("the ssh sessions' shell", SESSION_SHELL)),
}


def reserved_env(job: Any, doc: Document) -> Iterator[Diagnostic]:
    """FJ346 for an env name (or envFrom prefix) that is flatjob's or the launcher's own."""
    launchers = LAUNCHER_ENV.get(type(job), ())
    for g in groups(job):
        for ci, c in enumerate(containers_of(g.template)):
            where = (*g.template_path, "spec", "containers", ci)
            env = c.get("env")
            for i, e in enumerate(env if isinstance(env, list) else []):
                name = e.get("name") if isinstance(e, dict) else None
                if not isinstance(name, str):
                    continue
                owner = next((le for le in launchers if le.owns(name, g.type)), None)
                if name.startswith(RESERVED_ENV_PREFIX):
                    yield doc.diagnostic("FJ346", f"env {name}: flatjob's own (its launch scripts and runtime set them), so a job may not set it", (*where, "env", i, "name"), hint="use another name")
                elif owner is not None:
                    yield doc.diagnostic("FJ346", f"env {name}: the launcher's own configuration ({owner.reader} would read it), so a job may not set it", (*where, "env", i, "name"),
                                         hint="remove it: flatjob sets up the launcher's ssh and environment itself")
            env_from = c.get("envFrom")
            for i, e in enumerate(env_from if isinstance(env_from, list) else []):
                prefix = e.get("prefix") if isinstance(e, dict) else None
                if isinstance(prefix, str) and prefix and (prefix.startswith(RESERVED_ENV_PREFIX) or RESERVED_ENV_PREFIX.startswith(prefix)):
                    yield doc.diagnostic("FJ346", f"envFrom prefix {prefix!r}: it can make names starting with {RESERVED_ENV_PREFIX}, which are flatjob's own", (*where, "envFrom", i, "prefix"),
                                         hint="use another prefix")


# --- ColossalAIJob -----------------------------------------------------------------------


def colossalai_shape(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    s = job.spec
    old = s.launcher is not None or s.worker is not None
    new = s.torch_config is not None or s.replica_specs is not None
    if old and new:
        yield doc.diagnostic("FJ312", "use either launcher/worker or torchConfig/replicaSpecs, not both", ("spec",), key=True)
        return
    if old and s.worker is None:
        yield doc.diagnostic("FJ203", "missing required field 'worker' in spec", ("spec",), key=True)
    if not old and not new:
        yield doc.diagnostic("FJ203", "missing the job body: give worker (and launcher), or torchConfig and replicaSpecs", ("spec",), key=True)
    if new:
        if s.torch_config is None:
            yield doc.diagnostic("FJ203", "missing required field 'torchConfig' in spec", ("spec",), key=True)
        specs = s.replica_specs or []
        if not any(r.type == "worker" for r in specs):
            yield doc.diagnostic("FJ203", "replicaSpecs needs an entry of type worker", ("spec", "replicaSpecs") if s.replica_specs is not None else ("spec",), key=True)
        for i, r in enumerate(specs):
            if r.type == "launcher" and r.replicas != 1:
                yield doc.diagnostic("FJ204", f"the launcher has exactly one pod; replicas is {r.replicas}", ("spec", "replicaSpecs", i, "replicas"))


def colossalai_extra_args(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    """torchArgs/extraArgs reach torchrun through `colossalai run --extra_launch_args a=1,b`,
    a comma-separated list: a value with a comma cannot be passed."""
    s = job.spec
    field, items = (("worker", "torchArgs"), s.worker.torch_args) if s.worker is not None else (("torchConfig", "extraArgs"), s.torch_config.extra_args if s.torch_config else [])
    for i, arg in enumerate(items):
        if "," in arg:
            yield doc.diagnostic("FJ204", f"{arg!r} contains a comma, which colossalai run --extra_launch_args cannot pass", ("spec", *field, i))


def colossalai_worker_container(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    for g in groups(job):
        if g.type != "worker" or g.template is None:
            continue
        cs = containers_of(g.template)
        if cs and not any(c.get("name") == "worker" for c in cs):
            names = [c.get("name") for c in cs]
            # A container without a name (T9k's manuals leave it out of fragments) said "found None".
            found = ", ".join(repr(n) if isinstance(n, str) else "a container without a name" for n in names)
            first = names[0]
            hint = did_you_mean(first, ["worker"]) if isinstance(first, str) else "add name: worker"
            yield doc.diagnostic(
                "FJ310", f"ColossalAIJob workers need a container named 'worker' (found {found})",
                (*g.template_path, "spec", "containers"), key=True, hint=hint,
            )


def colossalai_restart_policy(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    """T9k's API reference defaults restartPolicy to OnFailure, its manual says ColossalAI pods
    are not restarted (a restarted pod cannot re-join `colossalai run`): flatjob follows the manual."""
    for i, r in enumerate(job.spec.replica_specs or []):
        rp = r.restart_policy
        if rp is not None and (rp.policy != "Never" or rp.limit > 0):
            yield doc.diagnostic(
                "FJ320", f"restartPolicy {rp.policy} is ignored: a restarted pod cannot re-join `colossalai run`, so no ColossalAI pod is restarted and a failed {r.type} fails the job",
                ("spec", "replicaSpecs", i, "restartPolicy"), key=True, severity=Severity.WARNING, hint="remove restartPolicy, or set policy: Never",
            )


def colossalai_launcher_image(job: ColossalAIJob, doc: Document) -> Iterator[Diagnostic]:
    """The launcher's image is a T9k field, not a template's: checked as a container's (hx17)."""
    launcher = job.spec.launcher
    why = podspec.image_problem(launcher.image) if launcher is not None and launcher.image else None
    if why:
        yield doc.diagnostic("FJ204", f"image {launcher.image!r} {why}", ("spec", "launcher", "image"))


# --- GenericJob --------------------------------------------------------------------------


def finish_rules(job: GenericJob, doc: Document) -> Iterator[Diagnostic]:
    counts = {r.type: r.replicas for r in job.spec.replica_specs}
    for field, rules in (("successRules", job.spec.success_rules), ("failureRules", job.spec.failure_rules)):
        for i, rule in enumerate(rules):
            if not rule:
                yield doc.diagnostic("FJ304", "an empty rule is never met", ("spec", field, i))
            for rtype, ranks in rule.items():
                path = ("spec", field, i, rtype)
                if rtype not in counts:
                    yield doc.diagnostic("FJ304", f"no replica type {rtype!r} in this job", path, key=True, hint=did_you_mean(rtype, counts))
                    continue
                if not ranks:  # met before any replica ran: the job would succeed (or fail) at once (review 20, round 10)
                    yield doc.diagnostic("FJ304", f"type {rtype!r} lists no rank: the rule would be met before any replica ran", path, hint="list the ranks, e.g. [\"0\"]")
                for j, rank in enumerate(ranks):
                    value = int(rank) if isinstance(rank, int) or (isinstance(rank, str) and _decimal(rank)) else None
                    if value is None or value < 0:
                        yield doc.diagnostic("FJ304", f"rank {rank!r} is not a non-negative integer", (*path, j))
                    elif value >= counts[rtype]:
                        yield doc.diagnostic("FJ304", f"rank {value} is out of range: type {rtype!r} has {counts[rtype]} replica(s)", (*path, j))


def references(job: GenericJob, doc: Document) -> Iterator[Diagnostic]:
    ports = None
    if job.spec.service is not None:
        ports = {p["name"]: p.get("port") for p in job.spec.service.ports if isinstance(p, dict) and isinstance(p.get("name"), str)}
    ctx = Context(job.metadata.name, {r.type: r.replicas for r in job.spec.replica_specs}, ports, lambda t, r: f"{t}-{r}")
    for g in groups(job):
        for ci, c in enumerate(containers_of(g.template)):
            env_names = {e.get("name") for e in c.get("env") or [] if isinstance(e, dict)}
            for path, value in _ref_strings(c, (*g.template_path, "spec", "containers", ci)):
                yield from islice(_check_refs(doc, ctx, g.type, path, value, env_names), MAX_REF_FINDINGS)


def _ref_strings(container: dict[str, Any], base: PathT) -> Iterator[tuple[PathT, str]]:
    """Yield (path, string) for command, args and env values of a container."""
    for field in ("command", "args"):
        items = container.get(field)
        for i, v in enumerate(items if isinstance(items, list) else []):
            if isinstance(v, str):
                yield (*base, field, i), v
    env = container.get("env")
    for i, e in enumerate(env if isinstance(env, list) else []):
        if isinstance(e, dict) and isinstance(e.get("value"), str):
            yield (*base, "env", i, "value"), e["value"]


def _check_refs(doc: Document, ctx: Context, rtype: str, path: PathT, value: str, env_names: set[Any]) -> Iterator[Diagnostic]:
    """Every reference that is wrong, at its place; each distinct text is judged once, and only
    as far as findings are asked for (a value may repeat `$(rank)` 100 000 times: judging and
    locating each took minutes; a wrong reference's "did you mean" is not cheap either)."""
    yield from _malformed_refs(doc, path, value)
    judged: dict[str, tuple[str, str, str | None, Severity] | None] = {}
    for text in distinct_refs(value)[:MAX_REFS]:  # found in C; stop at the first that is wrong
        judged[text] = _judge(text, ctx, rtype, env_names)
        if judged[text] is not None:
            break
    else:
        return  # none wrong: no occurrence needs locating
    reported: set[str] = set()
    for ref in iter_refs(value):
        if ref.text not in judged:
            if len(judged) >= MAX_REFS:
                return
            judged[ref.text] = _judge(ref.text, ctx, rtype, env_names)
        verdict = judged[ref.text]
        if verdict is None:
            continue
        code, message, hint, severity = verdict
        if code == "FJ501" and "FJ501" in reported:
            continue  # one "needs spec.service" per string is enough
        reported.add(code)
        # locate_text counts every occurrence in the source, $$( escapes included; so do we
        mark = doc.locate_text(path, ref.raw, value.count(ref.raw, 0, ref.start))
        yield doc.diagnostic_at(code, f"{ref.raw}{message}", mark, path, severity=severity, hint=hint)


def _judge(text: str, ctx: Context, rtype: str, env_names: set[Any]) -> tuple[str, str, str | None, Severity] | None:
    """(code, message after the reference, hint, severity) of what is wrong with $(text), or None."""
    if not is_ours(text):
        near = did_you_mean(text, ["type", "rank"])
        if text not in env_names and near:
            return "FJ500", " is neither a GenericJob variable nor an env var of this container; Kubernetes will leave it as text", near, Severity.WARNING
        return None
    try:
        resolve(text, ctx, rtype, 0)
    except RefError as err:
        return err.code, f": {err}", err.hint, Severity.ERROR
    return None


def _malformed_refs(doc: Document, path: PathT, value: str) -> Iterator[Diagnostic]:
    """References of ours that iter_refs cannot see: nested in another, or never closed."""
    for m in islice(_NESTED_REF.finditer(value), MAX_REF_FINDINGS):
        outer = _balanced(value, m.start())
        mark = doc.locate_text(path, outer, value.count(outer, 0, m.start()))
        yield doc.diagnostic_at(
            "FJ500", f"{outer}: a $(...) reference inside another is not resolved", mark, path,
            hint="each reference is substituted once; write the outer one out, e.g. $(service.worker[0].host)",
        )
    m = _UNCLOSED_REF.search(value)
    if m:
        text = m.group(0)
        mark = doc.locate_text(path, text, value.count(text, 0, m.start()))
        yield doc.diagnostic_at(
            "FJ500", f"{text[:40]!r} is not closed, so it is left as text", mark, path,
            severity=Severity.WARNING, hint="add the closing ')'",
        )


def _balanced(value: str, start: int) -> str:
    """The text from the "$(" at `start` to its matching ")" (or the end of the string)."""
    depth = 0
    for i in range(start + 1, len(value)):
        depth += {"(": 1, ")": -1}.get(value[i], 0)
        if depth == 0:
            return value[start : i + 1]
    return value[start:]


# --- the table ---------------------------------------------------------------------------

COMMON: tuple[Rule, ...] = (job_name, job_namespace, metadata_labels, flatjob_annotations, rendered_names, unique_types, run_mode, resume_specs, has_pods, has_containers, template_restart_policy, probes_end_replicas, container_images, reserved_env, *apivalues.RULES, *podspec.RULES, *podshape.RULES, *podparts.RULES)
RULES: dict[type, tuple[Rule, ...]] = {
    PyTorchTrainingJob: (*COMMON, elastic_range, elastic_needs_torchrun, torchrun_fields, tensorboard, *tensorboardpod.RULES),
    DeepSpeedJob: (*COMMON, elastic_range, deepspeed_run, deepspeed_slots, deepspeed_other_args, ssh_folder, reserved_paths, reserved_volumes, ssh_home_mounts, *launchers.DEEPSPEED_RULES),
    ColossalAIJob: (colossalai_shape, *COMMON, colossalai_worker_container, colossalai_extra_args, colossalai_restart_policy, colossalai_launcher_image, ssh_folder, reserved_paths, reserved_volumes, ssh_home_mounts, *launchers.COLOSSALAI_RULES),
    GenericJob: (*COMMON, finish_rules, references),
}


# Rules that take the pod templates' insides to be what the Kubernetes schema says (env a list
# of {name: string}, a spec a mapping): they run only once the schema found nothing wrong there,
# so a template of the wrong shape (`env: 1`, a mapping as an env name) is reported by the schema
# and never crashes them.  The other rules that look inside check every type they read (the
# job-shaped fuzzing of tests/hostile/test_fuzz.py holds them to it) and always run, so a
# template with a wrong field still hears that it lacks an image.
TEMPLATE_RULES = frozenset({resume_specs, references, *launchers.TEMPLATE_RULES, *podparts.RULES})


def check_rules(job: Any, doc: Document, templates_ok: bool = True) -> list[Diagnostic]:
    """Run every rule that applies to the job's kind (none when the job is too big to check;
    not those of TEMPLATE_RULES when the embedded Kubernetes objects are malformed)."""
    out = list(job_size(job, doc))
    if out:
        return out  # seat orders and pod names would cost time and memory in proportion
    for rule in RULES[type(job)]:
        if templates_ok or rule not in TEMPLATE_RULES:
            out.extend(rule(job, doc))
    return out
