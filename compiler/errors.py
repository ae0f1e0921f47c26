"""Every diagnostic flatjob can report: stable codes, severities and the Diagnostic record.

Codes are part of the public interface (CI scripts filter on them, SARIF rule ids use them);
docs/diagnostics.md lists each one with an example and a fix, and a test keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from enum import Enum

# How to add what `run-local` and the runtime need, in every message that asks for it: a
# clone's editable install is what the README's first command made.
RUNTIME_INSTALL = "pip install -e '.[runtime]' in your clone of flatjob (from a release: pip install 'flatjob[runtime]')"


class Severity(str, Enum):
    """How bad a finding is: errors fail lint and block compile, warnings do neither."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Code:
    """One stable diagnostic code with a short kebab-case name and a one-line summary."""

    id: str
    name: str
    summary: str


_TABLE = [
    # Input and YAML
    Code("FJ100", "yaml-syntax", "The file is not valid YAML."),
    Code("FJ101", "duplicate-key", "A mapping has the same key twice."),
    Code("FJ102", "no-job", "A file or folder named on the command line holds no T9k job, or a document of a T9k job kind has another apiVersion."),
    Code("FJ103", "unreadable", "A path cannot be read (missing, a directory where a file is expected, not UTF-8)."),
    Code("FJ104", "yaml-unsupported", "A YAML feature Kubernetes does not accept (complex keys, unknown tags, recursive aliases, a %YAML version other than 1.1)."),
    Code("FJ105", "input-limit", "An input is larger than flatjob reads or renders: file size, YAML nodes (aliases and merges counted), nesting depth, documents, pods, rendered bytes."),
    Code("FJ106", "link-skipped", "A symbolic link that leads outside the folder being read, or into a hidden folder, was not followed."),
    # Document shape
    Code("FJ200", "unknown-kind", "The kind is not one of the T9k job kinds flatjob handles."),
    Code("FJ201", "unknown-field", "A field that the job type does not have."),
    Code("FJ202", "wrong-type", "A value of the wrong type (string where a list is expected, and so on)."),
    Code("FJ203", "missing-field", "A required field is absent."),
    Code("FJ204", "bad-value", "A value outside the allowed set or range."),
    Code("FJ205", "bad-api-version", "The apiVersion is not batch.tensorstack.dev/v1beta1."),
    Code("FJ206", "deprecated-field", "A field T9k documents but ignores; flatjob ignores it too."),
    # Cross-field rules
    Code("FJ300", "run-target", "DeepSpeed config.run needs exactly one of python, module or exec."),
    Code("FJ301", "elastic-range", "Elastic replicas must satisfy 1 <= min <= expected <= max."),
    Code("FJ302", "elastic-needs-torchrun", "spec.elastic without torchrun is ignored, as T9k ignores it."),
    Code("FJ303", "duplicate-replica-type", "Two replica specs share one type."),
    Code("FJ304", "rule-reference", "A success/failure rule names a missing replica type or an out-of-range rank."),
    Code("FJ305", "bad-name", "A job name, namespace or derived pod name is not a valid DNS label of at most 63 characters."),
    Code("FJ306", "unknown-replica-type", "A runMode entry names a replica type the job does not have."),
    Code("FJ307", "run-mode-conflict", "Debug and pause mode are both enabled."),
    Code("FJ308", "proc-per-node", "procPerNode must be a positive integer, 'gpu', 'cpu' or 'auto'."),
    Code("FJ309", "reserved-path", "A volume (or the SSH keys) is mounted over a path flatjob reserves (scripts, hostfile, ssh keys, env file), or takes a volume name flatjob gives its own."),
    Code("FJ310", "missing-container", "The pod template lacks a container the job kind requires."),
    Code("FJ311", "conflicting-args", "A launcher argument conflicts with a typed config field."),
    Code("FJ312", "shape-conflict", "ColossalAIJob mixes the launcher/worker and torchConfig/replicaSpecs shapes."),
    Code("FJ313", "bad-label", "A label or annotation key or value is not valid for Kubernetes."),
    Code("FJ314", "no-replicas", "The job would create no pods."),
    Code("FJ315", "duplicate-job", "Two jobs render to the same output folder."),
    Code("FJ316", "torchrun-script", "torchrun mode runs the training container's args: they are empty, or its command holds more than python."),
    Code("FJ318", "resume-needs-command", "resumeSpecs change a container that has no command to wrap (it runs the image entrypoint)."),
    Code("FJ317", "bad-log-location", "A TensorBoard log location is not of the form t9k://pvc/<pvc>/<path>."),
    Code("FJ319", "etcd-endpoint", "rdzvBackend etcd or etcd-v2 without the etcd server's address in extraOptions."),
    Code("FJ320", "restart-ignored", "A ColossalAIJob restartPolicy: flatjob never restarts ColossalAI pods."),
    Code("FJ321", "tensorboard-source", "A TensorBoard log source flatjob does not mount (S3, HTTP, MinIO), or none at all."),
    Code("FJ322", "immutable-field", "A field T9k makes immutable changed since the record in the output folder."),
    Code("FJ323", "name-collision", "Two jobs render a PodTemplate (so a pod) or a Service of the same name in one namespace."),
    Code("FJ324", "object-too-large", "A rendered object (a pod's PodTemplate, the ConfigMap, the record) would be larger than the API server accepts."),
    Code("FJ340", "launcher-quoting", "A value deepspeed or colossalai run would not pass to the nodes as written (their remote shell splits, expands or runs it)."),
    Code("FJ341", "launcher-flag", "A launcher flag or script the launcher ignores, no longer has, or refuses while exiting 0."),
    Code("FJ342", "ssh-needs-root", "A DeepSpeedJob or ColossalAIJob pod is set to run as non-root; its sshd and ssh keys need root."),
    Code("FJ343", "ssh-command-ignored", "A DeepSpeedJob or ColossalAIJob container that runs sshd or the launcher has a command or args, which never run."),
    Code("FJ344", "pod-restart-ignored", "A pod template's restartPolicy other than Never: every pod's is Never; restarts follow the replica's restartPolicy."),
    Code("FJ345", "two-namespace-runtimes", "Jobs without a namespace beside jobs in namespace default, in namespace mode without -n: two runtimes `flatjob` in one namespace."),
    Code("FJ346", "reserved-env", "An environment variable flatjob's scripts or the launcher read as their own configuration (FLATJOB_*, DS_ENV_FILE, PDSH_SSH_ARGS...)."),
    Code("FJ347", "ssh-resume-command", "A resumeSpec gives a DeepSpeedJob or ColossalAIJob pod that runs sshd or the launcher a command or args: on resume they run instead of it."),
    Code("FJ348", "probe-ends-replica", "A livenessProbe or startupProbe on a job's container: every pod's restartPolicy is Never, so a failed probe ends the replica and its exit code decides."),
    Code("FJ350", "service-port-unmapped", "A GenericJob service port whose targetPort differs from its port: the replica Services are headless, so peers reach the pod on `port`, never on targetPort."),
    Code("FJ351", "slots-below-gpus", "A DeepSpeedJob without config.slotsPerWorker (1 process a worker) whose training container asks for more than one GPU."),
    Code("FJ352", "ssh-home-mounted", "A volume of a DeepSpeedJob or ColossalAIJob pod over the ~/.ssh folder where the keys of a custom ssh.authMountPath are linked for the ssh clients."),
    # Kubernetes pod template (strict schema of the pinned version)
    Code("FJ400", "k8s-unknown-field", "A field the pinned Kubernetes version does not know."),
    Code("FJ401", "k8s-wrong-type", "A Kubernetes field of the wrong type."),
    Code("FJ402", "k8s-bad-enum", "A value the API server would reject for an enumerated field."),
    Code("FJ403", "k8s-missing-field", "A required Kubernetes field is absent."),
    Code("FJ404", "k8s-bad-format", "A value in the wrong format (quantity, port range, and so on)."),
    Code("FJ405", "k8s-duplicate-name", "Two list entries share a name that must be unique."),
    # GenericJob substitution
    Code("FJ500", "bad-reference", "A $(...) reference that cannot be resolved at compile time."),
    Code("FJ501", "reference-needs-service", "$(service...) is used but spec.service is not set."),
    Code("FJ502", "unknown-port", "$(service.port[...]) names a port spec.service does not define."),
    # Overlays
    Code("FJ600", "overlay-target", "An overlay patch matches no job."),
    Code("FJ601", "overlay-patch", "An overlay patch cannot be applied."),
    Code("FJ602", "overlay-file", "An overlay folder or its kustomization-like file is malformed."),
    # Output
    Code("FJ700", "stale-output", "The committed rendered output differs from what compile produces."),
    Code("FJ701", "output-conflict", "The output folder holds files flatjob did not write where it must write."),
    Code("FJ702", "output-link", "The output folder holds a symbolic link (or a folder) where flatjob reads, writes or deletes a file."),
    Code("FJ703", "empty-source", "The sources hold no job, so compiling would delete every rendered job (pass --allow-empty)."),
    Code("FJ704", "output-busy", "Another flatjob compile kept the output folder locked for longer than flatjob waits."),
    Code("FJ705", "output-recovered", "A compile killed while writing the output folder was finished or undone first."),
]

CODES: dict[str, Code] = {c.id: c for c in _TABLE}


@dataclass(frozen=True)
class Diagnostic:
    """A finding at a place in a source file, printable as `path:line:col: severity: msg [CODE]`."""

    code: str
    message: str
    path: str = "<input>"
    line: int = 0  # 1-based; 0 when the finding has no position (e.g. an unreadable file)
    col: int = 0  # 1-based
    severity: Severity = Severity.ERROR
    hint: str | None = None  # "did you mean 'x'?" or how to fix it
    field: str | None = None  # dotted field path inside the document, e.g. spec.worker.replicas
    source_line: str | None = dc_field(default=None, compare=False)  # the offending line's text

    def __post_init__(self) -> None:
        if self.code not in CODES:  # a typo in a code is a bug in flatjob, caught by tests
            raise ValueError(f"unregistered diagnostic code {self.code}")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def unique(found: list[Diagnostic]) -> list[Diagnostic]:
    """Each finding once, in order (two checks, or one patch used twice, may agree)."""
    seen: set[tuple[str, int, int, str, str]] = set()
    out = []
    for d in found:
        key = (d.path, d.line, d.col, d.code, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


