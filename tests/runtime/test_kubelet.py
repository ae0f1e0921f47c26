"""The kubelet stand-in (runtime.sim.kubelet): what it runs, with which environment, and when.

- gated pods never start; released ones start after the scheduling delay, Ready at once;
- `sh -c` containers run for real with the pod's env: literal values, $(VAR) expansion as
  Kubernetes does it, downward-API annotations, labels, name and namespace;
- `sleep N` adds N seconds of virtual time instead of sleeping; `sleep inf` never ends;
- commands of other programs cannot run here and run until the pod is deleted;
- deleting a running pod stops it with 143 and removes it; eviction and kills;
- a native sidecar that exits is started again after the kubelet's CrashLoopBackOff
  back-off, its restart count and last state in its status, the pod Running but not Ready
  meanwhile; never once the pod is stopping;
- it binds pods as the scheduler does and writes statuses and deletions as a kubelet does, so
  a running pod of a compiled job is as big as a real one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from manifestkit import pods_of

from flatjob.compiler import keys
from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.runtime.api import Obj
from flatjob.runtime.observe import pod_state
from flatjob.runtime.sim.apiserver.clock import parse_time, stamp
from flatjob.runtime.sim.cluster import FakeCluster
from flatjob.runtime.sim.containers import Program
from flatjob.runtime.sim.kubelet import FakeKubelet, container_env, expand

NS = "default"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pod_body(command: list[str], *, name: str = "p", gated: bool = False, env: list[dict[str, Any]] | None = None, args: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": command, "env": env or []}
    if args is not None:
        container["args"] = args
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"team": "ml"}, "annotations": {keys.ATTEMPT: "2"}},
        "spec": {"schedulingGates": [{"name": keys.RELEASE_GATE}] if gated else [], "containers": [container]},
    }


@pytest.fixture
def world() -> tuple[FakeCluster, FakeKubelet, Clock]:
    clock = Clock()
    cluster = FakeCluster(clock)
    return cluster, FakeKubelet(cluster, NS, clock, schedule_delay=1.0), clock


def phase(cluster: FakeCluster, name: str = "p") -> str:
    return cluster.pods()[name]["status"]["phase"]


def advance(kubelet: FakeKubelet, clock: Clock, seconds: float, step: float = 0.5) -> None:
    end = clock.now + seconds
    while clock.now < end:
        kubelet.tick()
        clock.now += step
    kubelet.tick()


# --- $(VAR) expansion --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "x"),
        ("pre-$(A)-$(B)", "pre-x-y"),
        ("$(UNKNOWN)", "$(UNKNOWN)"),
        ("$$(A)", "$(A)"),
        ("$$", "$"),
        ("echo $$HOME", "echo $HOME"),
        ("$$$(A)", "$x"),
        ("$(A", "$(A"),
        ("$A ${A}", "$A ${A}"),
        ("$(A)$(A)", "xx"),
    ],
    ids=["var", "two-vars", "unknown-kept", "escaped-ref", "double-dollar", "double-dollar-before-name", "escape-then-ref", "unterminated", "shell-syntax-untouched", "adjacent"],
)
def test_expand_like_kubernetes(text: str, expected: str) -> None:
    assert expand(text, {"A": "x", "B": "y"}) == expected


def test_container_env_literal_expanded_and_downward_api() -> None:
    env = [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "$(A)-$(LATER)"},  # only earlier variables expand
        {"name": "LATER", "value": "z"},
        {"name": "ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{keys.ATTEMPT}']"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "MISSING", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['absent']"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    body = pod_body(["sh"], env=env)
    body["metadata"]["namespace"] = "team-a"
    got = container_env(body, body["spec"]["containers"][0])
    assert got == {
        "A": "1", "B": "1-$(LATER)", "LATER": "z", "ATTEMPT": "2", "TEAM": "ml", "MISSING": "",
        "POD": "p", "NS": "team-a", "IP": "", "HOSTNAME": "p",
    }


# --- running shell containers -------------------------------------------------------------------

def test_a_gated_pod_never_starts(world: Any) -> None:
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "exit 0"], gated=True))
    advance(kubelet, clock, 30)
    assert phase(cluster) == "Pending"


def test_a_released_pod_runs_after_the_scheduling_delay_and_exits(world: Any) -> None:
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep 5; exit 3"]))
    kubelet.tick()
    assert phase(cluster) == "Pending"
    clock.now += 1.0
    kubelet.tick()
    pod = cluster.pods()["p"]
    assert phase(cluster) == "Running"
    assert pod_state(pod).ready
    started = clock.now
    while phase(cluster) == "Running":
        clock.now += 0.5
        kubelet.tick()
    assert clock.now - started == 5.0
    state = pod_state(cluster.pods()["p"], "main")
    assert (state.phase, state.exit_code, state.reason, state.ready) == ("Failed", 3, "Error", False)


def test_exit_0_succeeds(world: Any) -> None:
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["/bin/sh", "-c"], args=["true"]))
    advance(kubelet, clock, 2)
    state = pod_state(cluster.pods()["p"], "main")
    assert (state.phase, state.exit_code, state.reason) == ("Succeeded", 0, "Completed")


def test_sleeps_add_up_as_virtual_time(world: Any) -> None:
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep 2; sleep 1.5s; sleep 0; exit 0"]))
    advance(kubelet, clock, 1)
    (main,) = kubelet.runs[cluster.pods()["p"]["metadata"]["uid"]].containers
    assert main.exit_at is not None and main.exit_at - main.started == 3.5


def test_the_container_sees_env_expanded_args_and_downward_api(world: Any, tmp_path: Path) -> None:
    cluster, kubelet, clock = world
    out = tmp_path / "env.txt"
    env = [
        {"name": "OUT", "value": str(out)},
        {"name": "A", "value": "1"},
        {"name": "B", "value": "$(A)-b"},
        {"name": "ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{keys.ATTEMPT}']"}}},
    ]
    script = 'printf "%s|%s|%s|%s|%s" "$A" "$B" "$ATTEMPT" "$1" "$(echo shell)" > "$OUT"'
    cluster.create_pod(NS, pod_body(["sh", "-c", script.replace("$(echo", "$$(echo"), "arg0", "$(B)"], env=env))
    advance(kubelet, clock, 2)
    assert out.read_text() == "1|1-b|2|1-b|shell"
    assert phase(cluster) == "Succeeded"


@pytest.mark.parametrize(
    ("command", "code", "grace"),
    [(["python", "train.py"], 143, 0), (["/usr/sbin/sshd", "-D"], 143, 0), (["sh", "-c", "sleep inf"], 137, 30),
     (["sh", "-c", "trap 'exit 143' TERM; sleep inf"], 143, 0), ([], 143, 0)],
    ids=["python", "sshd", "sleep-inf", "sh-with-a-trap", "image-entrypoint"],
)
def test_what_cannot_finish_runs_until_deleted(world: Any, command: list[str], code: int, grace: float) -> None:
    """A program it cannot run answers SIGTERM (torchrun, sshd); a shell without a trap is PID 1
    and the kernel drops SIGTERM for it, so it ends by SIGKILL when the 30 s grace is over."""
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(command))
    advance(kubelet, clock, 600, step=60)
    assert phase(cluster) == "Running"
    watch = cluster.watch_pods(NS, {}, str(cluster.rv))
    cluster.delete_pod(NS, "p", None)
    kubelet.tick()
    if grace:
        assert phase(cluster) == "Running"
        clock.now += grace
        kubelet.tick()
    assert phase(cluster) == "Failed"  # the terminal status first...
    clock.now += 1
    kubelet.tick()
    assert "p" not in cluster.pods()  # ...then the removal, in a later step
    events = watch.next_events()
    assert [e for e, _ in events] == ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]  # deletionTimestamp, the exit, grace 0, gone
    stopped = pod_state(events[1][1], "main")
    assert (stopped.phase, stopped.exit_code) == ("Failed", code)


def test_evict_and_kill(world: Any) -> None:
    cluster, kubelet, clock = world
    kubelet.behaviors["a"] = lambda pod, env: Program(on_term=143, term_seconds=3)  # a checkpoint on SIGTERM
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep inf"], name="a"))
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep inf"], name="b"))
    advance(kubelet, clock, 2)
    started = clock.now
    kubelet.evict("a", grace=5)
    kubelet.kill("b", 137)
    a, b = pod_state(cluster.pods()["a"], "main"), pod_state(cluster.pods()["b"], "main")
    # The eviction is not visible while a container may run (status_manager.go mergePodStatus):
    # a peer that notices the loss can report its own failure first.
    assert (a.phase, a.disruption) == ("Running", None) and "reason" not in cluster.pods()["a"]["status"]
    assert (b.phase, b.exit_code, b.disruption) == ("Failed", 137, None)
    advance(kubelet, clock, 10)
    a = pod_state(cluster.pods()["a"], "main")
    assert (a.phase, a.disruption) == ("Failed", "TerminationByKubelet") and a.exit_code in (137, 143)
    assert cluster.pods()["a"]["status"]["reason"] == "Evicted"
    assert (phase(cluster, "a"), phase(cluster, "b")) == ("Failed", "Failed")
    # Dated when the pod stopped (3 s after SIGTERM), not when the eviction began (mergePodStatus).
    (target,) = [c for c in cluster.pods()["a"]["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target["lastTransitionTime"] == stamp(started + 3)


def test_an_eviction_for_the_pods_own_storage_limit_has_no_disruption_target(world: Any) -> None:
    """localStorageEviction passes no condition: Failed, reason Evicted, the kubelet's message."""
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep inf"]))
    advance(kubelet, clock, 2)
    kubelet.evict("p", message="Pod ephemeral local storage usage exceeds the total limit of containers 10Gi. ", condition=False)
    advance(kubelet, clock, 3)
    state = pod_state(cluster.pods()["p"], "main")
    assert (state.phase, state.disruption, state.exit_code, state.evicted) == ("Failed", None, 137, "Pod ephemeral local storage usage exceeds the total limit of containers 10Gi. ")


def test_a_graceful_node_shutdown_fails_each_pod_terminated_with_the_shutdown_message(world: Any) -> None:
    """nodeshutdown_manager_linux.go killPods: reason Terminated, nodeShutdownMessage, DisruptionTarget."""
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep inf"]))
    advance(kubelet, clock, 2)
    kubelet.shutdown(kubelet.node, grace=2)
    advance(kubelet, clock, 3)
    status = cluster.pods()["p"]["status"]
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "Terminated", "Pod was terminated in response to imminent node shutdown.")
    state = pod_state(cluster.pods()["p"], "main")
    assert (state.disruption, state.evicted) == ("TerminationByKubelet", "Pod was terminated in response to imminent node shutdown.")


def test_a_readiness_gate_not_true_keeps_ready_false_and_containers_ready_true(world: Any) -> None:
    """GeneratePodReadyCondition: reason ReadinessGatesNotReady, which is no lost node."""
    cluster, kubelet, clock = world
    body = pod_body(["sh", "-c", "sleep inf"])
    body["spec"]["readinessGates"] = [{"conditionType": "example.com/lb-ready"}]
    cluster.create_pod(NS, body)
    advance(kubelet, clock, 2)
    conditions = {c["type"]: c for c in cluster.pods()["p"]["status"]["conditions"]}
    assert conditions["ContainersReady"]["status"] == "True"
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "ReadinessGatesNotReady")
    assert conditions["Ready"]["message"] == 'corresponding condition of pod readiness gate "example.com/lb-ready" does not exist.'
    state = pod_state(cluster.pods()["p"], "main")
    assert (state.phase, state.ready, state.node_lost_since) == ("Running", False, None)


# --- the API objects it writes -----------------------------------------------------------------------

def test_it_binds_a_released_pod_before_starting_it(world: Any) -> None:
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "sleep inf"]))
    advance(kubelet, clock, 2)
    live = cluster.pods()["p"]
    assert live["spec"]["nodeName"] == kubelet.node
    conditions = {c["type"]: c["status"] for c in live["status"]["conditions"]}
    assert conditions == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}
    status = live["status"]
    assert (status["hostIP"], status["podIPs"], status["startTime"]) == (kubelet.host_ip, [{"ip": status["podIP"]}], "1970-01-01T00:01:41Z")
    (c,) = status["containerStatuses"]
    assert c["image"] == "docker.io/library/busybox:latest" and c["imageID"].startswith("docker.io/library/busybox@sha256:")
    assert c["containerID"].startswith("containerd://") and c["started"] is True and c["ready"] is True
    assert c["volumeMounts"][0]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"


def test_a_deleted_pod_ends_terminal_and_goes_with_grace_0(world: Any) -> None:
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sh", "-c", "trap 'exit 143' TERM; sleep inf"]))
    advance(kubelet, clock, 2)
    watch = cluster.watch_pods(NS, {}, str(cluster.rv))
    cluster.delete_pod(NS, "p", None)
    assert cluster.pods()["p"]["metadata"]["deletionGracePeriodSeconds"] == 30  # scheduled: graceful
    kubelet.tick()
    clock.now += 1
    kubelet.tick()
    events = watch.next_events()
    assert [t for t, _ in events] == ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]  # the kubelet's grace-0 delete writes, then removes
    terminated = events[1][1]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (events[1][1]["status"]["phase"], terminated["exitCode"], terminated["reason"]) == ("Failed", 143, "Error")
    assert "p" not in cluster.pods()


@pytest.mark.parametrize("example", ["pytorch-ddp", "deepspeed", "genericjob-tfconfig"])
def test_a_running_pod_of_a_compiled_job_is_as_big_as_a_real_one(example: str) -> None:
    """A running pod as an API server returns it: defaults, admission, status and
    managedFields make it ~5-10 KB of compact JSON (an SSH pod carries flatjob's script paths too), not the ~2-3 KB that was rendered."""
    root = Path(__file__).resolve().parents[2]
    docs, _ = parse((root / "examples" / f"{example}.yaml").read_text(), f"{example}.yaml")
    files = compile_documents(Loaded(jobs=docs), CompileOptions(namespace=NS)).jobs[0].files
    rendered: list[Obj] = pods_of([d for d in yaml.safe_load_all(files["podtemplates.yaml"]) if d])
    clock = Clock()
    cluster = FakeCluster(clock)
    kubelet = FakeKubelet(cluster, NS, clock, behaviors={p["metadata"]["name"]: (lambda pod, env: (float("inf"), None)) for p in rendered})
    for p in rendered:
        cluster.create_pod(NS, p)
        cluster.patch_pod(NS, p["metadata"]["name"], [{"op": "remove", "path": "/spec/schedulingGates"}])
    advance(kubelet, clock, 2)
    for p in rendered:
        live = cluster.pods()[p["metadata"]["name"]]
        assert live["status"]["phase"] == "Running"
        size, before = len(json.dumps(live, separators=(",", ":"))), len(json.dumps(p, separators=(",", ":")))
        assert 5_000 <= size <= 12_000 and size > 2 * before, (p["metadata"]["name"], before, size)


# --- taint eviction's toleration time (taint_eviction.go getMinTolerationTime) ------------------

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("tolerations", "seconds"),
    [
        ([], 0.0),  # not tolerated: evicted at once
        ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}], 300.0),
        ([{"operator": "Exists"}], None),  # tolerates everything, for ever
        ([{"operator": "Exists"}, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 60}], 60.0),  # the least with seconds
        ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 600},
          {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 60}], 60.0),
        ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": -5}], 0.0),
        ([{"key": "other", "operator": "Exists"}], 0.0),
    ],
)
def test_the_least_toleration_seconds_of_the_matching_tolerations_decide(tolerations: list[dict[str, Any]], seconds: float | None) -> None:
    from flatjob.runtime.sim.nodes import toleration_seconds

    assert toleration_seconds({"spec": {"tolerations": tolerations}}, UNREACHABLE) == seconds


def test_an_empty_key_toleration_gets_no_default_toleration_seconds() -> None:
    """defaulttolerationseconds: a toleration with an empty key covers not-ready and unreachable."""
    from flatjob.runtime.sim.apiserver.defaults import _tolerations

    spec = {"tolerations": [{"operator": "Exists"}]}
    _tolerations(spec)
    assert spec["tolerations"] == [{"operator": "Exists"}]
    spec = {"tolerations": []}
    _tolerations(spec)
    assert [t["tolerationSeconds"] for t in spec["tolerations"]] == [300, 300]


@pytest.mark.parametrize(("inits", "want"), [
    ([], {"cpu": 2}),
    ([{"name": "i", "resources": {"requests": {"cpu": "3"}}}], {"cpu": 3}),  # an init container alone: the max
    ([{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}], {"cpu": 3}),  # a sidecar runs beside: summed
    ([{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
      {"name": "i", "resources": {"requests": {"cpu": "3"}}}], {"cpu": 4}),  # an init container after a started sidecar: both at once
])
def test_the_scheduler_counts_native_sidecars_beside_the_containers(inits: list[dict[str, Any]], want: dict[str, int]) -> None:
    """resourcehelper.PodRequests: regular containers and sidecars summed, or an init container
    with the sidecars started before it, whichever is more."""
    from flatjob.runtime.sim.scheduler import requests_of

    pod = {"spec": {"initContainers": inits, "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}]}}
    assert requests_of(pod) == want


# --- native sidecars that exit: the kubelet starts them again (KEP-753) ----------------------------

def sidecar_pod(policy: str = "Never", main: str = "sleep 3600; exit 0", name: str = "p") -> dict[str, Any]:
    """A pod with a native sidecar `side` beside `main`, restartPolicy `policy` (Never: flatjob's)."""
    body = pod_body(["sh", "-c", main], name=name)
    body["spec"]["restartPolicy"] = policy
    body["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always", "command": ["sh", "-c", "sleep inf"]}]
    return body


def crashing(clock: Clock, programs: list[Program], starts: list[float]) -> Callable[[dict[str, Any], dict[str, str]], Program]:
    """A behaviour: the n-th instance runs programs[n] (the last one from then on); each start's time is noted."""
    def behave(pod: dict[str, Any], env: dict[str, str]) -> Program:
        starts.append(clock.now)
        return programs[min(len(starts), len(programs)) - 1]
    return behave


def side_status(cluster: FakeCluster, name: str = "p") -> dict[str, Any]:
    return cluster.pods()[name]["status"]["initContainerStatuses"][0]


def test_an_exited_sidecar_is_restarted_at_once_then_after_10s_doubling_to_300s(world: Any) -> None:
    """kuberuntime_manager.go doBackOff with kubelet.go's container back-off (10 s, at most
    300 s): the first exit restarts at once, each later one waits twice as long as the last."""
    cluster, kubelet, clock = world
    starts: list[float] = []
    kubelet.behaviors["p/side"] = crashing(clock, [Program(1, 1)], starts)
    cluster.create_pod(NS, sidecar_pod())
    advance(kubelet, clock, 1100, step=1)
    waits = [b - a - 1 for a, b in pairwise(starts)]  # each instance ran 1 s
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300]
    assert side_status(cluster)["restartCount"] == len(starts) - 1 == 8
    assert phase(cluster) == "Running"


def test_the_back_off_starts_over_after_a_run_of_more_than_600s(world: Any) -> None:
    """flowcontrol's entry expires (kubelet.go backOff.HasExpiredFunc: 600 s) once an exit comes
    more than 600 s after the last start: that exit restarts at once, the next waits 10 s."""
    cluster, kubelet, clock = world
    starts: list[float] = []
    kubelet.behaviors["p/side"] = crashing(clock, [Program(1, 1), Program(1, 1), Program(1, 1), Program(700, 2), Program(1, 1)], starts)
    cluster.create_pod(NS, sidecar_pod())
    advance(kubelet, clock, 760, step=1)
    assert [b - a for a, b in pairwise(starts)] == [1, 11, 21, 700, 11]


@pytest.mark.parametrize(("policy", "code", "waiting"), [
    ("Never", 1, False),  # every pod flatjob renders: ShouldContainerBeRestarted says no, the exit stays the state
    ("Always", 1, True),
    ("OnFailure", 1, True),
    ("Always", 0, False),  # an init container that exited 0 stays terminated (convertToAPIContainerStatuses)
])
def test_a_sidecar_in_its_back_off_and_the_pod_beside_it(world: Any, policy: str, code: int, waiting: bool) -> None:
    """Between its second exit and its restart 10 s later: restartCount 1, not started nor
    ready; waiting CrashLoopBackOff with the last exit as lastState where the kubelet writes it
    so, else the exit as state and the run before as lastState.  The pod stays Running
    (getPhase ignores a sidecar's exits), Initialized (a regular container started), and Ready
    and ContainersReady go False with the sidecar named (generate.go)."""
    cluster, kubelet, clock = world
    starts: list[float] = []
    kubelet.behaviors["p/side"] = crashing(clock, [Program(5, code)], starts)
    cluster.create_pod(NS, sidecar_pod(policy))
    advance(kubelet, clock, 1, step=1)
    first = side_status(cluster)
    assert (first["restartCount"], first["started"], first["ready"], first["lastState"]) == (0, True, True, {})
    advance(kubelet, clock, 7, step=1)  # the first exit: restarted at once
    second = side_status(cluster)
    assert (second["restartCount"], second["started"], second["ready"]) == (1, True, True) and "running" in second["state"]
    assert second["lastState"]["terminated"]["exitCode"] == code and second["containerID"] != first["containerID"]
    advance(kubelet, clock, 3, step=1)  # the second exit: 10 s of back-off
    side, pod = side_status(cluster), cluster.pods()["p"]
    assert (side["restartCount"], side["started"], side["ready"]) == (1, False, False)
    exit_2 = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": stamp(starts[1]), "finishedAt": stamp(starts[1] + 5)}
    if waiting:
        message = f"back-off 10s restarting failed container=side pod=p_default({pod['metadata']['uid']})"
        assert side["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        assert side["lastState"] == {"terminated": exit_2} and side["containerID"] == second["containerID"]
    else:
        assert side["state"] == {"terminated": exit_2} and side["lastState"] == second["lastState"]
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    assert pod["status"]["phase"] == "Running" and conditions["Initialized"]["status"] == "True"
    for ctype in ("Ready", "ContainersReady"):
        assert (conditions[ctype]["status"], conditions[ctype]["reason"], conditions[ctype]["message"]) == ("False", "ContainersNotReady", "containers with unready status: [side]")
    state = pod_state(pod, "main")
    assert (state.phase, state.ready, state.node_lost_since) == ("Running", False, None)  # not a lost node: ContainersReady is False too
    advance(kubelet, clock, 10, step=1)
    side = side_status(cluster)
    assert (side["restartCount"], side["started"], side["ready"]) == (2, True, True) and "running" in side["state"]
    assert {c["type"]: c["status"] for c in cluster.pods()["p"]["status"]["conditions"]}["Ready"] == "True"


@pytest.mark.parametrize("how", ["deleted", "evicted"])
def test_a_sidecar_in_its_back_off_is_not_restarted_once_the_pod_is_stopping(world: Any, how: str) -> None:
    """ShouldContainerBeRestarted and SyncTerminatingPod: a pod being deleted or evicted gets no
    container started, sidecars included, though the back-off ends while it stops."""
    cluster, kubelet, clock = world
    starts: list[float] = []
    kubelet.behaviors["p/side"] = crashing(clock, [Program(5, 1)], starts)
    kubelet.behaviors["p"] = lambda pod, env: Program(on_term=0, term_seconds=60)  # 60 s to stop on SIGTERM
    body = sidecar_pod()
    body["spec"]["terminationGracePeriodSeconds"] = 90
    cluster.create_pod(NS, body)
    advance(kubelet, clock, 11, step=1)  # started, exited, restarted, exited again: 10 s of back-off
    assert len(starts) == 2 and "terminated" in side_status(cluster)["state"]
    if how == "deleted":
        cluster.delete_pod(NS, "p", None)
    else:
        kubelet.evict("p", grace=90)
    advance(kubelet, clock, 59, step=1)
    assert len(starts) == 2 and side_status(cluster)["restartCount"] == 1 and phase(cluster) == "Running"
    advance(kubelet, clock, 2, step=1)
    assert len(starts) == 2 and ("p" not in cluster.pods() or phase(cluster) == "Failed")


def test_a_sidecar_stopped_after_the_regular_containers_is_not_restarted(world: Any) -> None:
    """computePodActions: once every regular container has ended the kubelet kills the pod and
    starts no init container, so the sidecar's exit on SIGTERM is its last."""
    cluster, kubelet, clock = world
    starts: list[float] = []
    kubelet.behaviors["p/side"] = crashing(clock, [Program(on_term=143, term_seconds=3)], starts)
    cluster.create_pod(NS, sidecar_pod(main="sleep 20; exit 0"))
    advance(kubelet, clock, 40, step=1)
    side = side_status(cluster)
    assert (len(starts), phase(cluster), side["restartCount"], side["state"]["terminated"]["exitCode"]) == (1, "Succeeded", 0, 143)


def test_a_sidecar_that_runs_is_initialized_and_a_completed_init_container_ready(world: Any) -> None:
    """generate.go: an init container is initialized once ready (prober_manager.go: exited 0), a
    sidecar once started; until then Initialized is False and names them."""
    cluster, kubelet, clock = world
    body = sidecar_pod()
    body["spec"]["initContainers"].append({"name": "fetch", "image": "busybox", "command": ["sh", "-c", "sleep 5; exit 0"]})
    cluster.create_pod(NS, body)
    advance(kubelet, clock, 2, step=1)
    status = cluster.pods()["p"]["status"]
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert (status["phase"], initialized["status"], initialized["message"]) == ("Pending", "False", "containers with incomplete status: [fetch]")
    advance(kubelet, clock, 5, step=1)
    status = cluster.pods()["p"]["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}
    assert [(c["name"], c["ready"], c["started"]) for c in status["initContainerStatuses"]] == [("side", True, True), ("fetch", True, False)]


# --- the order of stopping: regular containers first, then sidecars last first (1.29+) ---------

def two_sidecar_pod(grace: int) -> dict[str, Any]:
    """`main` beside sidecars `s1` then `s2`, with `grace` seconds to stop."""
    body = sidecar_pod()
    side = body["spec"]["initContainers"][0]
    body["spec"]["initContainers"] = [{**side, "name": "s1"}, {**side, "name": "s2"}]
    body["spec"]["terminationGracePeriodSeconds"] = grace
    return body


def finished(pod: dict[str, Any]) -> dict[str, tuple[float, int]]:
    """Each container's (finishedAt, from the test's start; exitCode)."""
    status = pod["status"]
    return {c["name"]: (parse_time(c["state"]["terminated"]["finishedAt"]) - 100.0, c["state"]["terminated"]["exitCode"])
            for c in [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]}


@pytest.mark.parametrize(("how", "grace", "main", "s1", "s2", "want"), [
    # each stops when its turn comes: main 5 s after SIGTERM, then s2 (3 s), then s1 (1 s)
    ("deleted", 30, Program(on_term=0, term_seconds=5), Program(on_term=143, term_seconds=1), Program(on_term=143, term_seconds=3),
     {"main": (15, 0), "s2": (18, 143), "s1": (19, 143)}),
    # main ignores SIGTERM: killed when the grace ends, and the sidecars, told then, get the 2 s minimum each
    ("deleted", 10, Program(on_term=None), Program(on_term=None), Program(on_term=None),
     {"main": (20, 137), "s2": (22, 137), "s1": (22, 137)}),
    # the regular container ends by itself: the pod is killed with its grace, sidecars last first
    ("ended", 30, Program(10, 0), Program(on_term=143, term_seconds=2), Program(on_term=143, term_seconds=4),
     {"main": (11, 0), "s2": (15, 143), "s1": (17, 143)}),  # main started at 1 s (the scheduling delay)
    # a hard eviction's 1 s is raised to killContainer's 2 s minimum for main; the sidecars wait out the 1 s, not main
    ("evicted", 1, Program(on_term=None), Program(on_term=143), Program(on_term=143),
     {"main": (12, 137), "s2": (11, 143), "s1": (11, 143)}),
], ids=["deleted-in-turn", "deleted-grace-spent", "ended", "hard-eviction"])
def test_sidecars_stop_after_the_regular_containers_last_first(world: Any, how: str, grace: int, main: Program, s1: Program, s2: Program, want: dict[str, tuple[float, int]]) -> None:
    """kuberuntime_termination_order.go: a sidecar gets SIGTERM once the regular containers and
    every later sidecar have exited, or the grace has passed; killContainer then gives it what
    is left, at least minimumGracePeriodInSeconds (2 s), as it gives any container."""
    cluster, kubelet, clock = world
    kubelet.behaviors.update({"p/main": lambda pod, env: main, "p/s1": lambda pod, env: s1, "p/s2": lambda pod, env: s2})
    cluster.create_pod(NS, two_sidecar_pod(grace))
    advance(kubelet, clock, 10, step=1)
    assert phase(cluster) in ("Running", "Succeeded")
    if how == "deleted":
        cluster.delete_pod(NS, "p", None)
    elif how == "evicted":
        kubelet.evict("p")
    last = None
    for _ in range(40):  # the terminal status, seen before the pod object goes
        kubelet.tick()
        clock.now += 1
        last = cluster.pods().get("p", last)
    assert last is not None and last["status"]["phase"] in ("Succeeded", "Failed")
    assert finished(last) == want


@pytest.mark.parametrize("stall", ["pleg", "lost"])
def test_a_pod_force_deleted_while_its_kubelet_does_not_sync_runs_on_until_it_does(world: Any, stall: str) -> None:
    """A force delete removes the object at once, but only a syncing kubelet kills the
    containers of a pod that is not there (kubelet_pods.go HandlePodCleanups): with its PLEG
    stalled or its node cut off, the program runs on, and is killed once the kubelet is back."""
    cluster, kubelet, clock = world
    cluster.create_pod(NS, pod_body(["sleep", "inf"]))
    advance(kubelet, clock, 2)
    uid = cluster.pods()["p"]["metadata"]["uid"]
    node = cluster.pods()["p"]["spec"]["nodeName"]
    stop, back = {"pleg": (lambda: kubelet.pleg_unhealthy(node), lambda: kubelet.pleg_unhealthy(node, healthy=True)),
                  "lost": (lambda: kubelet.lose_node(node), lambda: kubelet.restore_node(node))}[stall]
    stop()
    cluster.delete_pod(NS, "p", None, grace_period_seconds=0)
    advance(kubelet, clock, 5)
    assert "p" not in cluster.pods() and uid in kubelet.runs  # gone from the API, running on its node
    back()
    advance(kubelet, clock, 1)
    assert uid not in kubelet.runs
