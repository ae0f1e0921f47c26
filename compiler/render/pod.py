"""Render one PodTemplate per PodPlan: the pod that will run, exactly, for git to hold.

Its `template` is the user's template plus flatjob's identity, env and gate; the runtime
creates the pod from it verbatim (adding only its own annotations and an ownerReference),
gated (spec.schedulingGates), with restartPolicy Never: the runtime releases the gang when
it is complete and restarts pods itself (docs/architecture.md §4).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .. import keys
from ..plan import ContainerPatch, JobPlan, PodPlan
from ..podtemplate import templates_digest
from .meta import metadata, pod_labels
from .scheduling import PodScheduling, pod_scheduling


def patch_container(container: dict[str, Any], patch: ContainerPatch, extra_env: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """Apply flatjob's changes (and `extra_env` after the patch's env); the input is not modified."""
    out = dict(container)
    if patch.command is not None:
        out["command"] = list(patch.command)
    if patch.args is not None:
        if patch.args:
            out["args"] = list(patch.args)
        else:
            out.pop("args", None)
    if patch.env or extra_env:
        own = container.get("env") or []
        taken = {e.get("name") for e in own}
        out["env"] = [e for e in (*patch.env, *extra_env) if e["name"] not in taken] + list(own)
    if patch.volume_mounts:
        out["volumeMounts"] = list(container.get("volumeMounts") or []) + list(patch.volume_mounts)
    if patch.ports:
        own_ports = container.get("ports") or []
        names = {p.get("name") for p in own_ports} | {p.get("containerPort") for p in own_ports}
        extra = [p for p in patch.ports if p.get("name") not in names and p.get("containerPort") not in names]
        if extra:
            out["ports"] = list(own_ports) + extra
    if patch.startup_probe is not None and "startupProbe" not in container:
        out["startupProbe"] = patch.startup_probe
    if patch.logs_on_error and "terminationMessagePolicy" not in container:
        out["terminationMessagePolicy"] = "FallbackToLogsOnError"
    if patch.resume is not None:
        out = _resume_wrapper(out, *patch.resume)
    return out


RESUME_TEST = 'if [ "${FLATJOB_RESUMING:-}" = true ]; then'


def _positional(n: int) -> str:
    """ "$1" "$2" ... "${10}": the first n arguments, as words (sh needs braces from 10 on)."""
    return " ".join(f'"${i}"' if i < 10 else f'"${{{i}}}"' for i in range(1, n + 1))


def _resume_wrapper(container: dict[str, Any], command: list[str] | None, args: list[str] | None) -> dict[str, Any]:
    """Run the resumeSpecs command when the runtime marks the pod as resuming, else the usual one.

    Both argument lists are passed to `sh -c` as arguments, never inside its script: the
    kubelet expands $(VAR) in command and args before the shell starts, so a variable's
    value (`x'$(touch f)'`, `it's`) must land in an argument, where the shell never parses
    it.  The script holds only flatjob's text and the count of the usual argv.
    """
    normal = [*(container.get("command") or []), *(container.get("args") or [])]
    resumed = [*(command if command is not None else container.get("command") or []), *(args if args is not None else container.get("args") or [])]
    resume = f"{RESUME_TEST} shift {len(normal)}; exec \"$@\"; fi\n" if resumed else ""
    out = dict(container)
    out["command"] = ["/bin/sh", "-c", f"{resume}exec {_positional(len(normal))}", "flatjob-resume"]
    out["args"] = [*normal, *resumed]
    return out


def _skip_on_resume(container: dict[str, Any]) -> dict[str, Any]:
    """An init container that does nothing when the pod starts a resume (resumeSpecs skipInitContainer).

    Its argv stays arguments of `sh -c` (see _resume_wrapper), never part of the script.
    """
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if not container.get("command"):
        return container  # no command to wrap (image entrypoint): lint reports this (FJ318)
    out = dict(container)
    out["command"] = ["/bin/sh", "-c", f'{RESUME_TEST} exit 0; fi\nexec "$@"', "flatjob-skip-init"]
    out["args"] = argv
    out["env"] = [*RUNTIME_ENV[2:], *(container.get("env") or [])]
    return out


def _downward(name: str, annotation: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}}}


# Set by the runtime at release; a training script can read how often the job restarted.
RUNTIME_ENV = (
    _downward("FLATJOB_ATTEMPT", keys.ATTEMPT),
    _downward("FLATJOB_RESTART_COUNT", keys.RESTART_COUNT),
    _downward("FLATJOB_RESUMING", keys.RESUMING),
)


def _canonical_json(body: dict[str, Any]) -> bytes:
    """Sorted-key, compact JSON: the same bytes for the same pod wherever it is rendered.

    orjson (5x faster than json here, ~15 ms saved per 1000 pods) is used by the compiler and
    the runtime alike, so both compute identical hashes; the record's templates come back from
    the API server with keys in another order, which sorting makes irrelevant.
    """
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


def spec_hash(pod: dict[str, Any]) -> str:
    """A short digest of what git renders for a pod; the runtime compares it to spot edits."""
    body = {"metadata": {k: v for k, v in pod["metadata"].items() if k != "annotations"}, "spec": pod["spec"]}
    return hashlib.sha256(_canonical_json(body)).hexdigest()[:16]


def _dns_config(plan: JobPlan, template_dns: dict[str, Any] | None) -> dict[str, Any] | None:
    """Add <job>.<ns>.svc.<domain> to the DNS search so T9k's <job>-<type>-<rank> resolves."""
    if not plan.namespace or not plan.service.headless:
        return template_dns
    dns = dict(template_dns or {})
    search = f"{plan.service.name}.{plan.namespace}.svc.{plan.options.cluster_domain}"
    dns["searches"] = [*(dns.get("searches") or []), search] if search not in (dns.get("searches") or []) else dns["searches"]
    return dns


class _JobShared:
    """What the pods of one job share, worked out once per job (or replica type), not per pod."""

    def __init__(self, plan: JobPlan) -> None:
        self.plan = plan
        self._scheduling: dict[str, PodScheduling] = {}
        self._dns: dict[int, tuple[Any, dict[str, Any] | None]] = {}

    def scheduling(self, pod: PodPlan) -> PodScheduling:
        """The scheduler's additions, which depend only on the pod's replica type."""
        found = self._scheduling.get(pod.type)
        if found is None:
            found = self._scheduling[pod.type] = pod_scheduling(self.plan, pod)
        return found

    def dns_config(self, template_dns: dict[str, Any] | None) -> dict[str, Any] | None:
        """_dns_config of a template's dnsConfig (one object per replica type)."""
        hit = self._dns.get(id(template_dns))
        if hit is None or hit[0] is not template_dns:
            hit = self._dns[id(template_dns)] = (template_dns, _dns_config(self.plan, template_dns))
        return hit[1]


def render_pod(plan: JobPlan, pod: PodPlan, shared: _JobShared | None = None) -> dict[str, Any]:
    """The Pod one planned pod runs as (the `template` of its PodTemplate)."""
    shared = shared or _JobShared(plan)
    tmeta = pod.template.get("metadata") or {}
    spec = dict(pod.template.get("spec") or {})
    if pod.container is not None:
        containers = list(spec.get("containers") or [])
        containers[pod.container] = patch_container(containers[pod.container], pod.patch, RUNTIME_ENV)
        spec["containers"] = containers
    if pod.drop_init_containers:
        spec.pop("initContainers", None)
    elif pod.skip_init_on_resume and spec.get("initContainers"):
        spec["initContainers"] = [_skip_on_resume(c) for c in spec["initContainers"]]
    if pod.volumes:
        spec["volumes"] = list(spec.get("volumes") or []) + list(pod.volumes)
    spec["restartPolicy"] = "Never"
    spec["hostname"] = pod.name
    if plan.service.headless:
        spec["subdomain"] = plan.service.name
    spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": keys.RELEASE_GATE}]
    _pin_by_affinity(spec)
    dns = shared.dns_config(spec.get("dnsConfig"))
    if dns:
        spec["dnsConfig"] = dns
    sched = shared.scheduling(pod)
    spec.update(sched.spec)
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(plan, pod.name, {**pod_labels(plan, pod, tmeta.get("labels")), **sched.labels}),
        "spec": spec,
    }
    annotations = {**(tmeta.get("annotations") or {}), **sched.annotations}
    if pod.container:  # the training container is not the first: T9k's `kubectl logs $POD -f` (UM examples) follows it
        annotations.setdefault(keys.KUBECTL_DEFAULT_CONTAINER, spec["containers"][pod.container].get("name"))
    annotations[keys.SPEC_HASH] = spec_hash(manifest)
    manifest["metadata"]["annotations"] = annotations
    return manifest


NO_SCHEDULE_ANY = {"operator": "Exists", "effect": "NoSchedule"}  # tolerates every NoSchedule taint, a cordon's included


def _pin_by_affinity(spec: dict[str, Any]) -> None:
    """A template's nodeName as the node affinity that means the same node: kube-apiserver
    refuses to create a pod with a nodeName and scheduling gates ("spec.nodeName: Forbidden:
    cannot be set until all schedulingGates have been cleared", pkg/apis/core/validation
    ValidatePodCreate), and every pod flatjob renders is gated.  The scheduler then binds the
    released pod to that node, as it binds a DaemonSet's (pkg/controller/daemon/util
    ReplaceDaemonSetPodNodeNameNodeAffinity: matchFields metadata.name, the node's name, not a
    label).  Each required term the template has must match the node as well; an empty term,
    which matches no node, stays so; none: the node alone.  A pod given a nodeName skips the
    scheduler, and its kubelet admits it past every NoSchedule taint and a cordon (it checks
    NoExecute taints only: pkg/kubelet/lifecycle/predicate.go), so the pod tolerates every
    NoSchedule taint, as the DaemonSet controller adds node.kubernetes.io/unschedulable's."""
    node = spec.pop("nodeName", None)
    if not node or not isinstance(node, str):
        return
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)]
    terms = [{**t, "matchFields": [*(t.get("matchFields") or []), pin]} if t.get("matchExpressions") or t.get("matchFields") else t for t in terms] or [{"matchFields": [pin]}]
    spec["affinity"] = {**affinity, "nodeAffinity": {**node_affinity, "requiredDuringSchedulingIgnoredDuringExecution": {**required, "nodeSelectorTerms": terms}}}
    tolerations = list(spec.get("tolerations") or [])
    if NO_SCHEDULE_ANY not in tolerations:
        spec["tolerations"] = [*tolerations, NO_SCHEDULE_ANY]


def _runtime_facts(plan: JobPlan, pod: PodPlan) -> dict[str, str]:
    """What the runtime reads off a PodTemplate besides the pod (see compiler.keys); the
    author's own SSH Secret among them, since the record's annotation is anyone's who may
    update the record (the runtime would take a Secret it did not make for the job's)."""
    facts = {keys.RANK: str(pod.rank), keys.WAVE: str(pod.wave)}
    if plan.ssh_secret_named and plan.ssh_secret:
        facts[keys.SSH_SECRET] = plan.ssh_secret
    if pod.seat is not None:
        facts[keys.SEAT] = str(pod.seat)
    container = _container_name(pod)
    if container is not None:
        facts[keys.TRAINING_CONTAINER] = container
    return facts


def _container_name(pod: PodPlan) -> str | None:
    containers = (pod.template.get("spec") or {}).get("containers") or []
    if pod.container is None or pod.container >= len(containers):
        return None
    return containers[pod.container].get("name")


def render_pod_template(plan: JobPlan, pod: PodPlan, shared: _JobShared | None = None) -> dict[str, Any]:
    """The PodTemplate git holds for one planned pod, named as the pod."""
    body = render_pod(plan, pod, shared)
    meta = body["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": metadata(plan, pod.name, dict(meta["labels"]), _runtime_facts(plan, pod)),
        "template": {"metadata": {"labels": meta["labels"], "annotations": meta["annotations"]}, "spec": body["spec"]},
    }


def render_pod_templates(plan: JobPlan) -> list[dict[str, Any]]:
    """Every pod of the job as a PodTemplate, in rank order (paused jobs too: the runtime
    deletes a paused job's pods and creates them again on resume)."""
    shared = _JobShared(plan)
    return [render_pod_template(plan, pod, shared) for pod in plan.pods]


def pod_templates_digest(plan: JobPlan) -> str:
    """The digest of the job's PodTemplates, for the record (compiler.podtemplate)."""
    return templates_digest([p.name for p in sorted(plan.pods, key=lambda p: (p.rank, p.name))])
