"""The scheduler stand-in: which released pod goes to which node, and when a gang may start.

Rules, each as kube-scheduler or a gang scheduler applies it:
- a pod with scheduling gates is never considered (PreEnqueue, SchedulingGates plugin); one
  whose gates are gone is scheduled `delay` seconds later, through the pods/binding
  subresource (PodScheduled=True, spec.nodeName);
- a node fits when it exists, is Ready, carries no NoSchedule or NoExecute taint the pod does
  not tolerate, matches the pod's nodeSelector, and has room for the pod's requests: the sum
  of its containers' requests, or its largest init container's if larger (resource.PodRequests
  in k8s.io/component-helpers/resource), against the node's allocatable less what its
  non-terminal pods request (terminating ones included: the NodeResourcesFit plugin);
- a pod no node fits stays Pending with PodScheduled=False, reason Unschedulable and the
  scheduler's FitError message, `0/N nodes are available: <count> <reason>, ... preemption:
  ...` (pkg/scheduler/framework/types.go FitError.Error); written again only when it changes;
- a gang: pods of a T9k PodGroup (label scheduler.tensorstack.dev/group-name; spec.minMember
  and roles[].minMember by label scheduler.tensorstack.dev/role), or a group the pod template
  names itself, coscheduling's (label scheduling.x-k8s.io/pod-group)
  or Volcano's (annotation scheduling.k8s.io/group-name), whose PodGroup's minMember a test
  gives in `groups` (their PodGroup objects are not served here; none: never binds) bind
  only when minMember of them are bound or can be placed now, all at once.  This is what
  scheduler-plugins' coscheduling does at Permit (pkg/coscheduling/core/core.go: a member
  waits until `len(assigned) >= minMember`, gated members count as siblings but are never
  assigned) and Volcano's gang plugin at allocation (pkg/scheduler/plugins/gang/gang.go,
  actions/allocate/allocate.go: nothing is committed unless JobReady, and scheduling-gated
  tasks are skipped): a gang with a gated member never starts.  A Kueue pod group is no gang
  here: Kueue admits it whole (its gate, sim/kueue.py) and kube-scheduler binds each pod alone;
- preemption (`preempt`): the DisruptionTarget condition `PreemptionByScheduler`, message
  "<scheduler>: preempting to accommodate a higher priority pod", then a graceful delete
  (pkg/scheduler/framework/preemption/preemption.go).
- the required node affinity (NodeAffinity plugin, k8s.io/component-helpers/scheduling/corev1/
  nodeaffinity): its terms ORed, each term's requirements ANDed, an empty term matching no
  node; matchExpressions on the node's labels (In, NotIn, Exists, DoesNotExist, Gt, Lt),
  matchFields on `metadata.name` (In, NotIn), as a DaemonSet's pods and a pinned template's are;
Not emulated: scores and spreading (the first fitting node in name order wins), preferred
and pod (anti-)affinity, priorities and the queue's order, ports, volumes, permit timeouts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..api import ApiError
from .apiserver import quantity
from .apiserver.clock import stamp
from .nodes import Node, tolerations_of
from .podstatus import disruption, update_condition

T9K_GROUP, T9K_ROLE = "scheduler.tensorstack.dev/group-name", "scheduler.tensorstack.dev/role"
COSCHEDULING_GROUP = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins apis/scheduling/v1alpha1 PodGroupLabel
VOLCANO_GROUP = "scheduling.k8s.io/group-name"  # volcano apis scheduling/v1beta1 KubeGroupNameAnnotationKey

Obj = dict[str, Any]
Requests = dict[str, Fraction]


def requests_of(pod: Obj) -> Requests:
    """What the pod asks the scheduler for: regular containers and native sidecars summed, or an
    init container with the sidecars started before it, whichever is more (resourcehelper
    PodRequests)."""
    def of(container: Obj) -> Requests:
        out: Requests = {}
        for key, value in ((container.get("resources") or {}).get("requests") or {}).items():
            try:
                out[key] = quantity.parse(value).value
            except quantity.QuantityError:
                continue
        return out

    def plus(a: Requests, b: Requests) -> Requests:
        return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in {*a, *b}}

    spec = pod.get("spec") or {}
    total: Requests = {}
    for c in spec.get("containers") or []:
        total = plus(total, of(c))
    sidecars: Requests = {}  # native sidecars started so far: they run beside what comes after them
    peak: Requests = {}
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            sidecars = plus(sidecars, of(c))
            step = sidecars
        else:
            step = plus(sidecars, of(c))
        peak = {k: max(peak.get(k, Fraction(0)), step.get(k, Fraction(0))) for k in {*peak, *step}}
    total = plus(total, sidecars)
    return {k: max(total.get(k, Fraction(0)), peak.get(k, Fraction(0))) for k in {*total, *peak}}


@dataclass(frozen=True)
class Gang:
    """A group of pods that bind together."""

    name: str
    min_member: int
    roles: tuple[tuple[str, int], ...] = ()  # (role, minMember)


@dataclass
class Scheduler:
    """Binds released pods to nodes, gangs all at once, and says why when it cannot."""

    cluster: Any  # runtime.sim.cluster.FakeCluster
    nodes: dict[str, Node]
    clock: Callable[[], float]
    namespace: str = "default"
    delay: float = 1.0
    name: str = "default-scheduler"
    seen: dict[str, float] = field(default_factory=dict)  # uid -> when its gates were gone
    reported: dict[str, str] = field(default_factory=dict)  # uid -> the Unschedulable message written
    groups: dict[str, int] = field(default_factory=dict)  # a coscheduling or Volcano PodGroup's name -> its minMember

    def tick(self) -> bool:
        now = self.clock()
        pods = sorted(self.cluster.pods(self.namespace).items())
        waiting = [(n, p) for n, p in pods if self._schedulable(p) and now - self.seen.setdefault(p["metadata"]["uid"], now) >= self.delay]
        if not waiting:
            return False
        used = self._used(pods)
        changed = False
        groups: dict[str, list[tuple[str, Obj]]] = {}
        for name, pod in waiting:
            gang = self._gang_name(pod)
            if gang is None:
                changed |= self._place_one(name, pod, used)
            else:
                groups.setdefault(gang, []).append((name, pod))
        for gang_name, members in sorted(groups.items()):
            changed |= self._place_gang(gang_name, members, pods, used)
        return changed

    # --- what fits where ------------------------------------------------------------------------
    @staticmethod
    def _schedulable(pod: Obj) -> bool:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        return not spec.get("schedulingGates") and not spec.get("nodeName") and not meta.get("deletionTimestamp") and (pod.get("status") or {}).get("phase", "Pending") == "Pending"

    def _used(self, pods: list[tuple[str, Obj]]) -> dict[str, Requests]:
        used: dict[str, Requests] = {n: {} for n in self.nodes}
        for _, pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in used and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                for key, value in requests_of(pod).items():
                    used[node][key] = used[node].get(key, Fraction(0)) + value
        return used

    def _why_not(self, node: Node, pod: Obj, wants: Requests, used: Requests) -> str | None:
        """Why `pod` cannot go to `node` (a FitError reason), or None when it fits."""
        if not node.exists:
            return "node(s) were deleted"
        for taint in node.taints:
            if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerations_of(pod, taint):
                return f"node(s) had untolerated taint {{{taint['key']}: }}"
        if node.ready != "True":
            return "node(s) were not ready"
        selector = (pod.get("spec") or {}).get("nodeSelector") or {}
        if any(node.labels.get(k) != v for k, v in selector.items()) or not _affinity_matches(pod, node):
            return "node(s) didn't match Pod's node affinity/selector"
        if node.allocatable is not None:
            for key, value in sorted(wants.items()):
                room = quantity.parse(node.allocatable.get(key, "0")).value - used.get(key, Fraction(0))
                if value > room:
                    return f"Insufficient {key}"
        return None

    def _fit(self, pod: Obj, used: dict[str, Requests]) -> tuple[str | None, dict[str, int]]:
        """The first node that fits (charging its requests), else the reasons by node count."""
        wants = requests_of(pod)
        reasons: dict[str, int] = {}
        for node in sorted(self.nodes.values(), key=lambda n: n.name):
            why = self._why_not(node, pod, wants, used[node.name])
            if why is None:
                for key, value in wants.items():
                    used[node.name][key] = used[node.name].get(key, Fraction(0)) + value
                return node.name, {}
            reasons[why] = reasons.get(why, 0) + 1
        return None, reasons

    def _fit_error(self, reasons: dict[str, int]) -> str:
        n = len(self.nodes)
        parts = ", ".join(f"{count} {why}" for why, count in sorted(reasons.items()))
        return f"0/{n} nodes are available: {parts}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."

    # --- binding --------------------------------------------------------------------------------
    def _place_one(self, name: str, pod: Obj, used: dict[str, Requests]) -> bool:
        node, reasons = self._fit(pod, used)
        if node is None:
            return self._unschedulable(name, pod, self._fit_error(reasons))
        return self._bind(name, pod, node)

    def _bind(self, name: str, pod: Obj, node: str) -> bool:
        try:
            self.cluster.bind_pod(self.namespace, name, node)
        except ApiError:
            return False  # deleted or gated again meanwhile: the next round looks again
        self.reported.pop(pod["metadata"]["uid"], None)
        return True

    def _unschedulable(self, name: str, pod: Obj, message: str) -> bool:
        uid = pod["metadata"]["uid"]
        if self.reported.get(uid) == message:
            return False
        self.reported[uid] = message
        status = pod.get("status") or {}
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message, "lastProbeTime": None,
                     "lastTransitionTime": stamp(self.clock())}
        others = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        try:
            self.cluster.set_pod_status(self.namespace, name, {**status, "conditions": [condition, *others]}, manager=self.name, uid=uid)
        except ApiError:
            return False
        return True

    # --- gangs ----------------------------------------------------------------------------------
    def _gang_name(self, pod: Obj) -> str | None:
        labels = pod["metadata"].get("labels") or {}
        group = labels.get(T9K_GROUP) or labels.get(COSCHEDULING_GROUP) or (pod["metadata"].get("annotations") or {}).get(VOLCANO_GROUP)
        return None if group is None else str(group)

    def _gang(self, name: str, member: Obj) -> Gang:
        labels = member["metadata"].get("labels") or {}
        if labels.get(T9K_GROUP) is None:  # the template's own group
            return Gang(name, self.groups.get(name, 1 << 30))
        try:
            group = self.cluster.get_podgroup(self.namespace, name)
        except ApiError:
            return Gang(name, 1 << 30)  # no PodGroup yet: T9k's scheduler keeps the pods pending
        spec = group.get("spec") or {}
        roles = tuple((str(r.get("name")), int(r.get("minMember") or 0)) for r in spec.get("roles") or [] if isinstance(r, dict))
        return Gang(name, int(spec.get("minMember") or 0), roles)

    def _place_gang(self, name: str, members: list[tuple[str, Obj]], pods: list[tuple[str, Obj]], used: dict[str, Requests]) -> bool:
        gang = self._gang(name, members[0][1])
        bound = [p for _, p in pods if self._gang_name(p) == name and (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        trial = {n: dict(u) for n, u in used.items()}
        placed: list[tuple[str, Obj, str]] = []
        reasons: dict[str, int] = {}
        for pname, pod in members:
            node, why = self._fit(pod, trial)
            if node is None:
                for k, v in why.items():
                    reasons[k] = reasons.get(k, 0) + v
                continue
            placed.append((pname, pod, node))
        ready = [*bound, *(p for _, p, _ in placed)]
        if len(ready) >= gang.min_member and all(sum(1 for p in ready if (p["metadata"].get("labels") or {}).get(T9K_ROLE) == role) >= need for role, need in gang.roles):
            used.update(trial)
            return any([self._bind(pname, pod, node) for pname, pod, node in placed])
        gated = sum(1 for _, p in pods if self._gang_name(p) == name and (p.get("spec") or {}).get("schedulingGates"))
        detail = f"; {gated} of its pods are still scheduling-gated" if gated else ""
        if reasons:
            detail += f"; {self._fit_error(reasons)}"
        message = f"pod group {name}: {len(ready)} of the {gang.min_member} pods it needs (minMember) can be placed, so none is bound{detail}"
        return any([self._unschedulable(pname, pod, message) for pname, pod in members])

    # --- preemption -----------------------------------------------------------------------------
    def preempt(self, name: str) -> None:
        """Evict a running pod for a higher-priority one: DisruptionTarget, then delete."""
        pod = self.cluster.pods(self.namespace)[name]
        status = pod.get("status") or {}
        condition = disruption("PreemptionByScheduler", f"{self.name}: preempting to accommodate a higher priority pod", self.clock())
        conditions = update_condition(list(status.get("conditions") or []), condition)  # preemption.go PrepareCandidate: apipod.UpdatePodCondition
        self.cluster.set_pod_status(self.namespace, name, {**status, "conditions": conditions}, manager=self.name, uid=pod["metadata"]["uid"])
        self.cluster.delete_pod(self.namespace, name, pod["metadata"]["uid"])


def _requirement(r: Obj, value: str | None) -> bool:
    """One NodeSelectorRequirement against the node's value for its key (None: absent)."""
    op, values = r.get("operator"), [str(v) for v in r.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _affinity_matches(pod: Obj, node: Node) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution: any term whose every requirement holds."""
    required = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    return any(
        (t.get("matchExpressions") or t.get("matchFields"))
        and all(_requirement(r, node.labels.get(r.get("key", ""))) for r in t.get("matchExpressions") or [])
        and all(_requirement(r, fields.get(r.get("key", ""))) for r in t.get("matchFields") or [])
        for t in terms if isinstance(t, dict))
