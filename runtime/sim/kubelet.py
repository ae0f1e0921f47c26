"""The kubelet stand-in of the scenario tests: pods on virtual time, in a real kubelet's order.

`FakeKubelet` drives a small simulated cluster: nodes (nodes.py), the scheduler's binding
(scheduler.py), the node lifecycle, taint eviction and PodGC controllers (nodes.py), the
disruption controller's reset of stale DisruptionTargets (disruption.py), and a kubelet on
each node.  Containers run their Program (containers.py): a busybox `sh -c` runs
for real (as PID 1, a shell without a `trap` ignores SIGTERM and ends by SIGKILL when the grace
period is over, as the kernel drops signals PID 1 has no handler for), a scenario gives other
pods a behaviour.  Every status is built by podstatus.py,
which run-local's kubelet shares.  What the kubelet does, with the source it follows:
- admission: a pod bound to a node whose kubelet runs gets startTime, hostIP, podIP and its
  containers waiting `ContainerCreating` (pkg/kubelet/kubelet_pods.go generateAPIPodStatus);
- volumes: a pod one of whose volumes cannot be mounted (`unmountable`: a ConfigMap or Secret
  that does not exist, a PVC still attached to another node) waits before any image is pulled,
  its containers waiting `ContainerCreating` (`PodInitializing` with init containers), and its
  status says nothing more: the kubelet's SyncPod waits WaitForAttachAndMount's 2m3s, fails
  with "unmounted volumes=[...]" in a FailedMount Event alone, and tries again at the next sync
  (kubelet.go SyncPod, volumemanager/volume_manager.go podAttachAndMountTimeout,
  kubelet_pods.go convertToAPIContainerStatuses' default waiting reasons);
- images: an image that cannot be pulled leaves its container waiting `ErrImagePull`, then
  `ImagePullBackOff` with `Back-off pulling image "<image>": ErrImagePull: <error>` (the 1.32
  wording, #127918), retried after 10 s doubling to 300 s (pkg/kubelet/images); the pod stays
  Pending; an init container's image is reported on its own status, the regular containers
  waiting `PodInitializing` (kubectl's `Init:ImagePullBackOff`; kuberuntime_manager.go pulls
  each image as its container starts; here every image is pulled before the first starts);
- init containers run one at a time, regular containers waiting `PodInitializing`; with
  restartPolicy Never (every pod flatjob renders) a failed init container fails the pod
  (getPhase), its exit code in initContainerStatuses; a native sidecar (an init container with
  restartPolicy Always) lets the next one start once it has started, runs beside the regular
  containers, and is stopped once they have all ended (the pod is killed: sidecars last
  first, as on deletion below); its code never decides the phase (kuberuntime_container.go
  computeInitContainerActions, kubelet_pods.go getPhase);
- a native sidecar that exits, with any code, is started again whatever the pod's
  restartPolicy (computeInitContainerActions), at once the first time, then after the
  container back-off: 10 s doubling to 300 s, begun anew when the exit came over 600 s after
  the last start (kuberuntime_manager.go doBackOff; kubelet.go containerBackOffPeriod,
  MaxContainerBackOff, backOff.HasExpiredFunc; client-go flowcontrol Backoff); never once the
  pod is stopping or its regular containers have all ended (computePodActions, helpers.go
  ShouldContainerBeRestarted); its status: restartCount one more per start, lastState the
  exit before, and while it waits its exit as its state, or waiting `CrashLoopBackOff`
  "back-off 10s restarting failed container=<name> pod=<pod>_<ns>(<uid>)" with that exit as
  lastState where the pod's restartPolicy restarts a failed container (kubelet_pods.go
  convertToAPIContainerStatuses; not under Never, flatjob's); not started nor ready
  meanwhile, so the pod stays Running (getPhase) but Ready and ContainersReady go False
  (podstatus.py);
- running: every regular container running, Ready and ContainersReady True (probes are not
  run); a container that ends stays terminated (restartPolicy Never); when all have ended the
  phase is Succeeded if each exited 0, else Failed;
- deletion (deletionTimestamp): SIGTERM to every running regular container, which exits with
  its program's code, or SIGKILL (137) when the grace period (deletionGracePeriodSeconds,
  counted from when the kubelet starts stopping the pod: a node back after taint eviction gives
  it the whole grace, pod_workers.go calculateEffectiveGracePeriod) ends, never under 2 s
  (kuberuntime_container.go killContainer, minimumGracePeriodInSeconds); native sidecars stop
  after them, last first, each once the regular containers and every later sidecar have exited
  or the grace has passed, then with what is left of it, at least 2 s (1.29+:
  kuberuntime_termination_order.go; the same order whenever the kubelet kills a pod: an
  eviction, the deadline, the regular containers' end); then the terminal phase is written, Succeeded only when every regular
  container exited 0 (kubelet.go SyncTerminatingPod, getPhase with podIsTerminal: since
  1.27, #115331), and only then, in a later step, the pod is removed with grace 0 and its UID
  as precondition (status_manager.go canBeDeleted, syncPod); a pod deleted before it started
  ends Failed with its containers `ContainerStatusUnknown` 137 (status_manager.go
  TerminatePod);
- activeDeadlineSeconds: once passed, the pod is killed as on deletion and ends Failed with
  reason `DeadlineExceeded`, "Pod was active on the node longer than the specified deadline"
  (pkg/kubelet/active_deadline.go); the pod object stays;
- node-pressure eviction (`evict`): SIGTERM, SIGKILL after the eviction's grace period (1 s
  for a hard threshold, immediateEvictionGracePeriodSeconds, which killContainer raises to 2 s; a soft one's
  evictionMaxPodGracePeriod), then phase Failed, reason `Evicted`, the DisruptionTarget
  condition `TerminationByKubelet`; the pod object stays (pkg/kubelet/eviction/eviction_manager.go
  evictPod); as for any terminal phase, the phase, reason, message and DisruptionTarget are
  written only once every container has stopped (status_manager.go mergePodStatus), so a peer
  that notices the loss first can report its own failure before the eviction is visible, and
  the DisruptionTarget is dated then, when the pod stopped, not when the eviction began
  (mergePodStatus: updateLastTransitionTime "again here because the older transition time
  ... is likely stale"); an eviction for the pod's own ephemeral-storage or emptyDir limit
  carries no DisruptionTarget (`condition=False`: localStorageEviction passes a nil condition),
  nor does any eviction on Kubernetes before 1.26;
- graceful node shutdown (`shutdown`): as an eviction of every pod on the node, with reason
  `Terminated` and "Pod was terminated in response to imminent node shutdown."
  (pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go killPods);
- admission rejection (`reject`): a pod the kubelet turns away before any container starts
  (a device plugin's `UnexpectedAdmissionError`, `OutOfcpu`, `NodeAffinity`) ends Failed with
  the admit handler's reason and "Pod was rejected: <message>", its startTime, no container
  status and no DisruptionTarget; the object stays (kubelet.go HandlePodAdditions ->
  canAdmitPod -> rejectPod, status_manager.go SetPodStatus);
- a lost node (`lose_node`): its kubelet writes nothing more; the controllers of nodes.py
  then mark its pods not ready and evict them, and PodGC removes them once the node is
  deleted (`delete_node`); `restore_node` brings the kubelet back, which finishes what was
  asked meanwhile (a partition healed); `reboot_node` brings it back without its containers:
  each that was running reads exited 255, reason Unknown, as containerd's CRI restore
  reports it, and the pod ends Failed (restartPolicy Never);
- an unhealthy PLEG (`pleg_unhealthy`): the kubelet posts its node Ready=False and syncs no
  pod (kubelet.go syncLoop, "Skipping pod synchronization"; pkg/kubelet/pleg/generic.go
  Healthy), so its pods stay Running and Ready, their programs run on unreported, and a
  deletion is not acted on until it relists again (`pleg_unhealthy(name, healthy=True)`);
  a pod force-deleted meanwhile (or while its node is lost) is gone from the API server but
  its program runs on until the kubelet syncs again and kills what is not there
  (kubelet_pods.go HandlePodCleanups), beside any replacement made elsewhere meanwhile;
Test controls: `behaviors`, `kill`, `evict`, `reject`, `unpullable`, `unmountable`, nodes and their capacity
(`add_node`), `lose_node`, `restore_node`, `reboot_node`, `delete_node`, `out_of_service`, `pleg_unhealthy`, and
`scheduler.preempt`.  Not emulated: probes, restarts of regular containers (every pod flatjob
renders has restartPolicy Never, and the runtime creates no pod from a PodTemplate whose pod's
is not: job.pod_spec refuses it), a sidecar restart's wait for the kubelet's next sync of the
pod (here it starts as its back-off ends), volumes, preStop hooks, the CRI's own delays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..api import ApiError
from . import disruption as disruption_controller
from .apiserver.clock import parse_time
from .cluster import FakeCluster
from .containers import (
    INF,
    SIGKILL_EXIT,
    Behaviour,
    Program,
    ShellRunner,
    as_program,
    container_env,
    expand,
    until_deleted,
)
from .nodes import OUT_OF_SERVICE, Node, NodeControllers
from .podstatus import ContainerLook, PodLook, disruption, full_image, is_sidecar, rejected, status
from .scheduler import Scheduler
from .timings import MIN_GRACE, Backoff, next_backoff, wait_left

PULL_BACKOFF, PULL_BACKOFF_CAP = 10.0, 300.0
# kubelet_pods.go convertToAPIContainerStatuses writes a sidecar waiting for its restart as
# waiting CrashLoopBackOff only where ShouldContainerBeRestarted (container/helpers.go) says so
# for the pod's restartPolicy, and never after an exit 0; else its exit stays its state.
CRASH_LOOP_SHOWN = {"Always": True, "OnFailure": True, "Never": False}
REBOOT_EXIT, REBOOT_REASON = 255, "Unknown"  # containerd's unknownExitCode, unknownExitReason
HARD_EVICTION_GRACE = 1.0  # eviction_manager.go immediateEvictionGracePeriodSeconds
DEFAULT_GRACE = 30  # terminationGracePeriodSeconds when the pod has none (the API's default)
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
EVICTED_MESSAGE = "The node was low on resource: memory. "
SHUTDOWN_REASON = "Terminated"  # nodeshutdown_manager_linux.go nodeShutdownReason
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."  # nodeShutdownMessage
UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"
REJECTED_MESSAGE = "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected"

Obj = dict[str, Any]


@dataclass
class _Container:
    """One container of a pod that the kubelet started."""

    name: str
    program: Program
    started: float
    exit_at: float | None = None  # when it exits (by itself, on SIGTERM, or SIGKILL)
    code: int | None = None  # its exit code, once it exits at exit_at
    reason: str | None = None
    restarts: int = 0  # its restart count (the CRI label the kubelet reads back)
    previous: _Container | None = None  # the instance before it, whose exit is its lastState

    def exits(self, at: float, code: int, reason: str | None = None) -> None:
        if self.exit_at is None or at < self.exit_at:
            self.exit_at, self.code, self.reason = at, code, reason

    def ended(self, now: float) -> bool:
        return self.exit_at is not None and now >= self.exit_at

    def look(self, now: float) -> ContainerLook:
        last = self.previous.look(now) if self.previous is not None else None
        if self.ended(now):
            reason = self.reason or ("Completed" if self.code == 0 else "Error")
            return ContainerLook(self.name, "terminated", reason, None, self.code, self.started, self.exit_at, restarts=self.restarts, last=last)
        return ContainerLook(self.name, "running", started=self.started, ready=True, restarts=self.restarts, last=last)


def _go_duration(seconds: float) -> str:
    """Go's time.Duration String for whole seconds under an hour: 10s, 1m20s, 5m0s."""
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def _backing_off(c: _Container, pod: Obj, delay: float, now: float) -> ContainerLook:
    """A sidecar waiting out its back-off: waiting CrashLoopBackOff with doBackOff's message and
    its exit as lastState where CRASH_LOOP_SHOWN says so, else its exit as it is."""
    exited = c.look(now)
    if c.code == 0 or not CRASH_LOOP_SHOWN.get((pod.get("spec") or {}).get("restartPolicy", "Always"), True):
        return exited
    meta = pod["metadata"]
    message = f"back-off {_go_duration(delay)} restarting failed container={c.name} pod={meta['name']}_{meta.get('namespace', '')}({meta['uid']})"
    return ContainerLook(c.name, "waiting", "CrashLoopBackOff", message, restarts=c.restarts, last=exited)


@dataclass
class _Pod:
    """What the kubelet of a node keeps about one pod incarnation (its UID)."""

    name: str
    admitted: float
    node: str = ""  # where it runs: a kubelet that does not sync (lost, PLEG unhealthy) kills nothing
    stage: str = "pull"  # pull | init | run | done
    pulls: int = 0  # failed pulls in a row
    pull_retry: float = 0.0
    pull_at: float | None = None  # when the last pull failed
    pull_error: str | None = None
    inits: list[_Container] = field(default_factory=list)
    containers: list[_Container] = field(default_factory=list)
    term_at: float | None = None  # when SIGTERM was sent
    killed: bool = False  # its regular containers (or an init container) ended: the sidecars were told to stop
    reason: str | None = None  # pod-level: DeadlineExceeded, Evicted
    message: str | None = None
    conditions: tuple[tuple[str, str], ...] = ()  # (reason, message) of the DisruptionTarget it writes once the pod is terminal
    done_at: float | None = None  # when the terminal phase was written
    backoffs: dict[str, Backoff] = field(default_factory=dict)  # sidecar name -> its restart back-off


def _signal(c: _Container, now: float, kill_at: float) -> None:
    """SIGTERM now: it exits with its program's code, or by SIGKILL (137) at `kill_at`."""
    p = c.program
    if p.on_term is not None and now + p.term_seconds <= kill_at:
        c.exits(now + p.term_seconds, p.on_term)
    else:
        c.exits(kill_at, SIGKILL_EXIT)


def _init_failed(run: _Pod, inits: list[Obj], now: float) -> bool:
    """The last init container started (not a sidecar) ended non-zero: the pod fails."""
    return bool(run.inits) and not is_sidecar(inits[len(run.inits) - 1]) and run.inits[-1].ended(now) and run.inits[-1].code != 0


def _keeps_sidecars(run: _Pod, inits: list[Obj], now: float) -> bool:
    """The kubelet restarts sidecars while the pod is not stopping, no init container failed and
    a regular container runs or is yet to start (kuberuntime_manager.go computePodActions: with
    none left to keep or start, KillPod and no init container starts)."""
    return run.term_at is None and not _init_failed(run, inits, now) and not (run.containers and all(c.ended(now) for c in run.containers))


def _grace(spec: Obj) -> float:
    """The pod's terminationGracePeriodSeconds (the API's default when it has none)."""
    grace = spec.get("terminationGracePeriodSeconds")
    return float(grace) if isinstance(grace, int) and not isinstance(grace, bool) else float(DEFAULT_GRACE)


def _stop(run: _Pod, inits: list[Obj], now: float, grace: float) -> None:
    """killPodWithSyncResult with `grace` seconds: SIGTERM now to the regular containers and a
    running init container; each native sidecar, last first, once the regular containers and
    every later sidecar have exited, or `grace` has passed (kuberuntime_termination_order.go
    newTerminationOrdering, waitForTurn); each gets what is left of the grace, the wait counted
    in whole seconds, and never under MIN_GRACE (kuberuntime_container.go killContainer)."""
    kill_at = now + max(grace, MIN_GRACE)
    sidecars = [c for c, spec in zip(run.inits, inits, strict=False) if is_sidecar(spec)]
    for c in [*run.containers, *(c for c in run.inits if c not in sidecars)]:
        if not c.ended(now):
            _signal(c, now, kill_at)
    turn = max([now, *(c.exit_at for c in run.containers if c.exit_at is not None)])
    for c in reversed(sidecars):
        if c.ended(now):
            continue  # not running: nothing waits for it (its channel is closed at once)
        at = min(turn, now + grace) if grace > 0 else now
        _signal(c, at, at + max(grace - int(at - now), MIN_GRACE))
        turn = max(turn, c.exit_at if c.exit_at is not None else at)


def _stop_sidecars(spec: Obj, run: _Pod, now: float, init_failed: bool = False) -> None:
    """Once every regular container has ended (or an init container failed), the pod is killed:
    its sidecars stop in reverse order (`_stop`) with the pod's grace period."""
    if not init_failed and (not run.containers or not all(c.ended(now) for c in run.containers)):
        return
    if run.term_at is None and not run.killed:
        run.killed = True
        _stop(run, spec.get("initContainers") or [], now, _grace(spec))


def _pull_message(image: str) -> str:
    ref = full_image(image)
    return f'failed to pull and unpack image "{ref}": failed to resolve reference "{ref}": {ref}: not found'


@dataclass
class FakeKubelet:
    """Nodes, the scheduler, the node controllers and every node's kubelet, on virtual time."""

    cluster: FakeCluster
    namespace: str = "default"
    clock: Callable[[], float] = lambda: 0.0
    schedule_delay: float = 1.0
    runner: ShellRunner = field(default_factory=ShellRunner)
    node: str = "fake-node-1"  # the first node's name
    host_ip: str = "10.0.0.1"
    # Scenario behaviour: "<pod>" (its regular containers) or "<pod>/<container>" (any one) ->
    # f(pod, env) -> Program (or the older (seconds, exit code or None for "until stopped")).
    behaviors: dict[str, Behaviour] = field(default_factory=dict)
    unpullable: set[str] = field(default_factory=set)  # images as written in the spec
    unmountable: set[str] = field(default_factory=set)  # pod names whose volumes cannot be mounted
    runs: dict[str, _Pod] = field(default_factory=dict)  # pod uid -> what its kubelet keeps
    rejects: dict[str, tuple[str, str]] = field(default_factory=dict)  # pod name -> (reason, message) of its next admission
    ips: dict[str, str] = field(default_factory=dict)  # uid -> pod IP
    kueue: Any = None  # Kueue (kueue.KueuePods: its webhook, admission and finalizer), where a scenario installs it

    def __post_init__(self) -> None:
        self.nodes: dict[str, Node] = {self.node: Node(self.node, self.host_ip, heartbeat=self.clock())}
        self.scheduler = Scheduler(self.cluster, self.nodes, self.clock, self.namespace, self.schedule_delay)
        self.controllers = NodeControllers(self.cluster, self.nodes, self.clock, self.namespace)

    # --- test controls ----------------------------------------------------------------------------
    def add_node(self, name: str, allocatable: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Node:
        node = Node(name, f"10.0.0.{len(self.nodes) + 1}", allocatable, dict(labels or {}), heartbeat=self.clock())
        self.nodes[name] = node
        return node

    def lose_node(self, name: str) -> None:
        """The node's kubelet stops posting status (power loss, a partition)."""
        self.nodes[name].kubelet_up = False

    def pleg_unhealthy(self, name: str, healthy: bool = False) -> None:
        """The node's kubelet finds its PLEG unhealthy (a container runtime that hangs): it posts
        Ready=False and syncs no pod, whose containers run on unseen; `healthy=True`: it relists
        again and syncs what happened meanwhile (nodes.py)."""
        self.nodes[name].pleg_healthy = healthy

    def restore_node(self, name: str) -> None:
        """The node's kubelet reports again, its containers still running (a partition healed)."""
        self.nodes[name].kubelet_up = True

    def reboot_node(self, name: str) -> None:
        """The node comes back from a reboot (power, a kernel panic, a GPU reset): no container
        survived.  containerd's CRI restore reports each one that was running as exited 255,
        reason Unknown (containerd pkg/cri/server/restart.go loadContainer: unknownExitCode,
        unknownExitReason); the kubelet starts no restartPolicy Never pod again
        (kuberuntime_manager.go computePodActions), so getPhase ends it Failed."""
        now = self.clock()
        for pod in self.cluster.pods(self.namespace).values():
            run = self.runs.get(pod["metadata"]["uid"])
            if run is None or (pod.get("spec") or {}).get("nodeName") != name:
                continue
            for c in [*run.inits, *run.containers]:
                if not c.ended(now):
                    c.exit_at, c.code, c.reason = now, REBOOT_EXIT, REBOOT_REASON
        self.nodes[name].kubelet_up = True

    def delete_node(self, name: str) -> None:
        """The Node object is deleted (`kubectl delete node`, a cloud provider's node controller)."""
        self.nodes[name].deleted_at = self.clock()

    def out_of_service(self, name: str) -> None:
        """`kubectl taint node <name> node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`."""
        self.nodes[name].taints.append({"key": OUT_OF_SERVICE, "effect": "NoExecute", "timeAdded": self.clock()})

    def kill(self, name: str, code: int = 137, reason: str | None = None) -> None:
        """Make a running pod's containers exit now with `code` (reason OOMKilled, say); before
        they started, its running init container (a native sidecar is left running)."""
        pod = self.cluster.pods(self.namespace)[name]
        run = self.runs.get(pod["metadata"]["uid"])
        if run is None:
            return
        now = self.clock()
        inits = (pod.get("spec") or {}).get("initContainers") or []
        for c in run.containers or [c for c, spec in zip(run.inits, inits, strict=False) if not is_sidecar(spec)]:
            if not c.ended(now):
                c.exit_at, c.code, c.reason = now, code, reason
        self._sync(name, pod, now)

    def reject(self, name: str, reason: str = "UnexpectedAdmissionError", message: str = REJECTED_MESSAGE) -> None:
        """The next incarnation of `name` that reaches its node is rejected at admission."""
        self.rejects[name] = (reason, message)

    def shutdown(self, node: str, grace: float = 30.0, condition: bool = True) -> None:
        """Graceful node shutdown (nodeshutdown_manager_linux.go killPods): every pod on `node` gets
        SIGTERM, SIGKILL after `grace` (its priority group's shutdownGracePeriod, at most its own),
        then Failed, reason Terminated, "Pod was terminated in response to imminent node
        shutdown." and, since 1.26, DisruptionTarget TerminationByKubelet (`condition`)."""
        for name, pod in sorted(self.cluster.pods(self.namespace).items()):
            if (pod.get("spec") or {}).get("nodeName") == node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self.evict(name, SHUTDOWN_MESSAGE, grace, condition, reason=SHUTDOWN_REASON)

    def evict(self, name: str, message: str = EVICTED_MESSAGE, grace: float = HARD_EVICTION_GRACE, condition: bool = True, reason: str = "Evicted") -> None:
        """Node-pressure eviction by the kubelet: SIGTERM now, SIGKILL after `grace` (1 s for a
        hard threshold, raised to killContainer's 2 s minimum; a soft one's
        evictionMaxPodGracePeriod); Failed, reason Evicted and
        DisruptionTarget are reported once every container has stopped."""
        pod = self.cluster.pods(self.namespace)[name]
        run = self.runs.get(pod["metadata"]["uid"])
        now = self.clock()
        if run is None:
            return
        run.reason, run.message = reason, message
        run.conditions = (("TerminationByKubelet", message),) if condition else ()
        self._terminate(pod, run, now, now + grace)
        self._sync(name, pod, now)

    # --- the loop ---------------------------------------------------------------------------------
    def tick(self) -> bool:
        """Advance the scheduler, the controllers and every kubelet as far as the clock allows;
        True when anything changed."""
        now = self.clock()
        changed = self.scheduler.tick()
        changed |= self.controllers.tick()
        if self.kueue is not None:
            changed |= self.kueue.tick()
        changed |= disruption_controller.reset_stale(self.cluster, self.namespace, now)
        pods = sorted(self.cluster.pods(self.namespace).items())
        stored = {p["metadata"]["uid"] for _, p in pods}
        for uid in [u for u, run in self.runs.items() if u not in stored and self._syncs(run.node)]:
            # Removed from the API server (a force delete): a kubelet kills what is not there
            # (HandlePodCleanups), but only once it syncs again: a lost or PLEG-stalled one
            # leaves the program running meanwhile, beside any replacement elsewhere.
            del self.runs[uid]
        for name, pod in pods:
            if not self._syncs((pod.get("spec") or {}).get("nodeName") or ""):
                continue  # (kubelet.go syncLoop: no pod is synced while a runtime health check fails)
            changed |= self._sync(name, pod, now)
        return changed

    def _syncs(self, node_name: str) -> bool:
        """Whether the kubelet of the node acts on its pods: up, its PLEG healthy, its Node there."""
        node = self.nodes.get(node_name)
        return node is not None and node.kubelet_up and node.pleg_healthy and node.exists

    def _sync(self, name: str, pod: Obj, now: float) -> bool:
        """One kubelet pass over one pod: start, advance, stop, report, remove."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = meta["uid"]
        run = self.runs.get(uid)
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if run is None:
            if phase in ("Succeeded", "Failed"):
                return self._remove(name, uid) if meta.get("deletionTimestamp") else False
            run = self.runs[uid] = _Pod(name, now, spec.get("nodeName") or "")
            if name in self.rejects:
                return self._reject(name, pod, run, now, *self.rejects.pop(name))
        if run.stage == "done":
            if meta.get("deletionTimestamp") and run.done_at is not None and now > run.done_at:
                return self._remove(name, uid)
            return False
        if meta.get("deletionTimestamp") and run.term_at is None:  # the grace counts from when this kubelet starts stopping it
            grace = meta.get("deletionGracePeriodSeconds")  # (pod_workers.go calculateEffectiveGracePeriod): a node back late gives it whole
            self._terminate(pod, run, now, now + grace if isinstance(grace, int) and not isinstance(grace, bool) else parse_time(meta["deletionTimestamp"]))
        deadline = spec.get("activeDeadlineSeconds")
        if isinstance(deadline, int) and run.term_at is None and now >= run.admitted + deadline:
            run.reason, run.message = "DeadlineExceeded", DEADLINE_MESSAGE
            self._terminate(pod, run, now, now + _grace(spec))
        self._advance(pod, run, now)
        return self._report(name, pod, run, now)

    # --- a pod's life ---------------------------------------------------------------------------
    def _program(self, pod: Obj, container: Obj, regular: bool) -> Program:
        name = pod["metadata"]["name"]
        behave = self.behaviors.get(f"{name}/{container.get('name')}") or (self.behaviors.get(name) if regular else None)
        if behave is not None:
            return as_program(behave(pod, container_env(pod, container)))
        if not regular and not is_sidecar(container) and not (container.get("command") or container.get("args")):
            return Program(0.0, 0)  # an init container nothing here can run: it completes
        return as_program(self.runner.run(pod, container))

    def _start(self, pod: Obj, container: Obj, now: float, regular: bool, before: _Container | None = None) -> _Container:
        """Start a container; `before`: the instance of it that exited, which this one follows."""
        program = self._program(pod, container, regular)
        c = _Container(container.get("name", ""), program, now)
        if before is not None:
            c.restarts, c.previous = before.restarts + 1, replace(before, previous=None)
        ends = program.ends_at(now)
        if ends is not None and program.code is not None:
            c.exits(ends, program.code)
        return c

    def _advance(self, pod: Obj, run: _Pod, now: float) -> None:
        spec = pod.get("spec") or {}
        inits, regular = spec.get("initContainers") or [], spec.get("containers") or []
        if run.stage == "pull" and run.term_at is None and pod["metadata"]["name"] in self.unmountable:
            return  # WaitForAttachAndMount: no container is created, no image pulled, until its volumes are there
        if run.stage == "pull" and run.term_at is None:
            missing = next((c.get("image", "") for c in [*inits, *regular] if c.get("image", "") in self.unpullable), None)
            if missing is not None:
                if now >= run.pull_retry:  # a pull attempt: it fails, the back-off doubles
                    run.pull_error, run.pull_at = _pull_message(missing), now
                    run.pull_retry = now + min(PULL_BACKOFF * 2 ** run.pulls, PULL_BACKOFF_CAP)
                    run.pulls += 1
                return
            run.pull_error, run.stage = None, "init" if inits else "run"
        if run.stage == "init":
            while run.term_at is None:
                started_sidecar = bool(run.inits) and is_sidecar(inits[len(run.inits) - 1])
                if not run.inits or started_sidecar or run.inits[-1].ended(now):
                    last = run.inits[-1] if run.inits and not started_sidecar else None
                    if last is not None and last.code != 0:
                        break  # a failed init container: restartPolicy Never fails the pod
                    if len(run.inits) == len(inits):
                        run.stage = "run"
                        break
                    run.inits.append(self._start(pod, inits[len(run.inits)], now, regular=False))
                else:
                    break
        if run.stage == "run" and not run.containers and run.term_at is None:
            run.containers = [self._start(pod, c, now, regular=True) for c in regular]
        self._restart_sidecars(pod, run, inits, now)
        _stop_sidecars(spec, run, now, init_failed=_init_failed(run, inits, now))
        if self._finished(run, inits, now):
            run.stage, run.done_at = "done", now

    def _restart_sidecars(self, pod: Obj, run: _Pod, inits: list[Obj], now: float) -> None:
        """kuberuntime_container.go computeInitContainerActions: an exited sidecar is started
        again, whatever its exit code and the pod's restartPolicy, once doBackOff lets it."""
        if not _keeps_sidecars(run, inits, now):
            return
        for i, (c, container) in enumerate(zip(run.inits, inits, strict=False)):
            if is_sidecar(container) and c.exit_at is not None and c.ended(now) and not wait_left(run.backoffs.get(c.name), c.exit_at, now):
                run.backoffs[c.name] = next_backoff(run.backoffs.get(c.name), c.exit_at, now)
                run.inits[i] = self._start(pod, container, now, regular=False, before=c)

    def _terminate(self, pod: Obj, run: _Pod, now: float, kill_at: float) -> None:
        """Stop the pod (`_stop`) with the grace left until `kill_at`."""
        run.term_at = now
        _stop(run, (pod.get("spec") or {}).get("initContainers") or [], now, max(kill_at - now, 0.0))

    @staticmethod
    def _finished(run: _Pod, inits: list[Obj], now: float) -> bool:
        if _init_failed(run, inits, now):
            return all(c.ended(now) for c in run.inits)  # an init container failed: once the sidecars before it have stopped
        if run.term_at is not None and not run.containers:
            return all(c.ended(now) for c in run.inits)  # stopped before the regular containers started
        return bool(run.containers) and all(c.ended(now) for c in [*run.containers, *run.inits])

    # --- reporting ------------------------------------------------------------------------------
    def _ip(self, uid: str) -> str:
        if uid not in self.ips:
            n = len(self.ips) + 2
            self.ips[uid] = f"10.244.{n // 250}.{n % 250 + 2}"
        return self.ips[uid]

    def _look(self, pod: Obj, run: _Pod, now: float) -> PodLook:
        spec = pod.get("spec") or {}
        node = self.nodes.get(spec.get("nodeName") or "")
        inits, regular = spec.get("initContainers") or [], spec.get("containers") or []
        restarting = _keeps_sidecars(run, inits, now)  # an exited sidecar then waits out its back-off
        init_looks = [_backing_off(c, pod, run.backoffs[c.name][0], now) if restarting and c.name in run.backoffs and is_sidecar(i) and c.ended(now) else c.look(now)
                      for c, i in zip(run.inits, inits, strict=False)]
        init_looks += [ContainerLook(c.get("name", ""), "waiting", "PodInitializing" if run.stage != "pull" else "ContainerCreating") for c in inits[len(run.inits):]]
        if run.containers:
            looks = [c.look(now) for c in run.containers]
        else:
            waiting = "PodInitializing" if inits and run.stage != "pull" else "ContainerCreating"
            looks = [self._waiting(c, run, waiting) for c in regular]
        bad = next((c for c in inits if c.get("image", "") in self.unpullable), None) if run.stage == "pull" and run.pull_error else None
        if bad is not None:  # an init container's image is pulled as it starts: the error is its own, the rest wait
            init_looks = [self._waiting(c, run, "PodInitializing") if c is bad else ContainerLook(c.get("name", ""), "waiting", "PodInitializing") for c in inits]
            looks = [ContainerLook(c.get("name", ""), "waiting", "PodInitializing") for c in regular]
        phase = "Pending"
        if run.stage == "done":
            stopped_early = not run.containers
            if stopped_early and run.term_at is not None and not (run.inits and run.inits[-1].code):
                looks = [ContainerLook(c.get("name", ""), "terminated", "ContainerStatusUnknown", UNKNOWN_MESSAGE, SIGKILL_EXIT, now, now) for c in regular]
            ok = bool(run.containers) and all(c.code == 0 for c in run.containers) and run.reason is None
            phase = "Succeeded" if ok else "Failed"
        elif run.containers:
            phase = "Running"
        # The terminal phase, its reason and message and DisruptionTarget are held back while a
        # container could still run (status_manager.go mergePodStatus: "Delay transitioning a
        # pod to a terminal status unless the pod is actually terminal").
        held = run.stage != "done"
        return PodLook(phase, self._ip(pod["metadata"]["uid"]), run.admitted, now, node.ip if node else self.host_ip,
                       tuple(init_looks), tuple(looks), None if held else run.reason, None if held else run.message,
                       () if held else tuple(disruption(reason, message, run.done_at or now) for reason, message in run.conditions))

    def _waiting(self, container: Obj, run: _Pod, default: str) -> ContainerLook:
        name, image = container.get("name", ""), container.get("image", "")
        if run.stage == "pull" and image in self.unpullable and run.pull_error is not None:
            if self.clock() == run.pull_at:  # the attempt that just failed, then its back-off
                return ContainerLook(name, "waiting", "ErrImagePull", run.pull_error)
            return ContainerLook(name, "waiting", "ImagePullBackOff", f'Back-off pulling image "{image}": ErrImagePull: {run.pull_error}')
        return ContainerLook(name, "waiting", default)

    def _reject(self, name: str, pod: Obj, run: _Pod, now: float, reason: str, message: str) -> bool:
        """rejectPod: the pod ends before any container starts (podstatus.rejected)."""
        run.stage, run.done_at, run.reason, run.message = "done", now, reason, message
        try:
            self.cluster.set_pod_status(self.namespace, name, rejected(pod, reason, message, now), uid=pod["metadata"]["uid"])
        except ApiError:
            return False
        return True

    def _report(self, name: str, pod: Obj, run: _Pod, now: float) -> bool:
        doc = status(pod, self._look(pod, run, now))
        if doc == pod.get("status"):
            return False
        try:
            self.cluster.set_pod_status(self.namespace, name, doc, uid=pod["metadata"]["uid"])
        except ApiError:
            return False  # gone or replaced meanwhile: the next pass sees it
        return True

    def _remove(self, name: str, uid: str) -> bool:
        """The status manager's last step: delete the terminal pod, grace 0, this UID only."""
        self.runs.pop(uid, None)
        try:
            self.cluster.set_pod_status(self.namespace, name, {}, remove=True, uid=uid)
        except ApiError:
            return False
        return True


__all__ = ["INF", "FakeKubelet", "Program", "ShellRunner", "container_env", "expand", "until_deleted"]
