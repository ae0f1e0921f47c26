"""run-local's kubelet against the API server's store, without the runtime (fast; not marked e2e).

It binds a pod once its gate is gone and runs it with the pod's own annotations, writes
Running and then the final status with exit codes (a kubelet's shape, read back as the
runtime reads it); a deleted pod gets SIGTERM, its final status, and is removed; a pod it
never ran is removed at once; on shutdown it stops every pod and starts no more.  Init
containers run in the pod's order, a native sidecar started in its turn (one that cannot start
holds the rest back); an init container failing after a sidecar started stops it and fails
the pod; sidecars stop after the regular containers, last first, and restart with back-off.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flatjob.compiler import keys
from flatjob.runtime.local.containers import Options, pod_launch
from flatjob.runtime.local.kubelet import LocalKubelet
from flatjob.runtime.local.processes import PodLaunch
from flatjob.runtime.observe import pod_state
from flatjob.runtime.sim.cluster import FakeCluster

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

NS = "default"
IP = {"p-0": "127.0.1.1", "p-1": "127.0.1.2"}


def pod(name: str, script: str, grace: int = 30, gated: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script], "env": [
            {"name": "ATTEMPT", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{keys.ATTEMPT}']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]}],
    }
    if gated:
        spec["schedulingGates"] = [{"name": keys.RELEASE_GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "annotations": {keys.ATTEMPT: "4"}}, "spec": spec}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[FakeCluster, LocalKubelet, list[tuple[str, str]]]]:
    fake = FakeCluster(time.time)
    lines: list[tuple[str, str]] = []

    def launch(p: dict[str, Any]) -> PodLaunch:
        meta = p["metadata"]
        mark = f"kubelet-test-{os.getpid()}/{meta['name']}/{meta['uid']}"
        return pod_launch(p, meta["uid"], IP[meta["name"]], meta.get("annotations") or {}, "main", Options(cwd=str(tmp_path)), tmp_path, mark, {})

    kubelet = LocalKubelet(fake.store, fake, NS, IP, launch, lambda label, line: lines.append((label, line)))
    kubelet.start()
    yield fake, kubelet, lines
    kubelet.close()


def until(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError("not reached in time")


def stored(fake: FakeCluster, name: str) -> dict[str, Any] | None:
    return fake.pods(NS).get(name)


def phase(fake: FakeCluster, name: str) -> str | None:
    p = stored(fake, name)
    return (p.get("status") or {}).get("phase") if p else None


def test_a_released_pod_runs_with_its_annotations_and_ends_with_its_exit_code(world: Any) -> None:
    fake, _, lines = world
    fake.create_pod(NS, pod("p-0", 'echo "attempt $ATTEMPT at $IP"; exit 3'))
    time.sleep(0.2)
    assert phase(fake, "p-0") == "Pending" and not lines  # gated: never bound, never run
    fake.patch_pod(NS, "p-0", [{"op": "remove", "path": "/spec/schedulingGates"}])
    until(lambda: phase(fake, "p-0") == "Failed")
    p = stored(fake, "p-0")
    assert p["spec"]["nodeName"] and p["status"]["podIP"] == "127.0.1.1"
    state = pod_state(p, "main")
    assert (state.phase, state.exit_code, state.reason) == ("Failed", 3, "Error")
    assert lines == [("p-0", "attempt 4 at 127.0.1.1")]


def test_a_deleted_pod_is_stopped_reported_and_removed(world: Any) -> None:
    fake, _, _ = world
    fake.create_pod(NS, pod("p-0", "echo up; exec sleep 300", gated=False))
    until(lambda: phase(fake, "p-0") == "Running")
    uid = stored(fake, "p-0")["metadata"]["uid"]
    seen: list[dict[str, Any]] = []
    fake.store.listeners.append(lambda change: seen.append(change.obj) if change.key == "pods" else None)
    fake.delete_pod(NS, "p-0", uid)  # graceful: the kubelet ends it
    until(lambda: stored(fake, "p-0") is None)
    final = [o for o in seen if (o.get("status") or {}).get("phase") == "Failed"]
    assert final and pod_state(final[-1], "main").exit_code == 143  # SIGTERM, reported before removal


def test_a_pod_that_ignores_sigterm_is_killed_after_the_deletions_grace_period(world: Any) -> None:
    fake, _, _ = world
    fake.create_pod(NS, pod("p-0", 'trap "" TERM; echo up; sleep 300 & wait', grace=1, gated=False))
    until(lambda: phase(fake, "p-0") == "Running")
    started = time.monotonic()
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None)
    assert 0.9 < time.monotonic() - started < 5


def test_a_pod_removed_at_once_has_its_processes_killed(world: Any) -> None:
    fake, kubelet, _ = world
    fake.create_pod(NS, pod("p-0", "echo up; exec sleep 300", gated=False))
    until(lambda: phase(fake, "p-0") == "Running")
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"], grace_period_seconds=0)  # no deletionTimestamp is ever seen
    until(lambda: not kubelet.runs)  # killed and forgotten: a shutdown does not wait for it


def test_a_pod_replaced_before_its_binding_is_not_run_as_the_old_incarnation(world: Any) -> None:
    fake, kubelet, lines = world
    fake.create_pod(NS, pod("p-0", 'echo "attempt $ATTEMPT"', gated=False))
    old = stored(fake, "p-0")
    fake.delete_pod(NS, "p-0", old["metadata"]["uid"], grace_period_seconds=0)
    new = pod("p-0", 'echo "attempt $ATTEMPT"', gated=False)
    new["metadata"]["annotations"][keys.ATTEMPT] = "5"
    fake.create_pod(NS, new)
    kubelet._start("p-0", old)  # the snapshot the kubelet took before the replacement
    until(lambda: phase(fake, "p-0") == "Succeeded")
    assert lines == [("p-0", "attempt 5")]


def test_shutdown_stops_every_pod_keeps_its_status_and_starts_no_more(world: Any) -> None:
    fake, kubelet, _ = world
    fake.create_pod(NS, pod("p-0", "exec sleep 300", gated=False))
    until(lambda: phase(fake, "p-0") == "Running")
    kubelet.shutdown()
    assert kubelet.wait_idle(10)
    assert pod_state(stored(fake, "p-0"), "main").exit_code == 143  # like a node shutting down: the pod stays, Failed
    fake.create_pod(NS, pod("p-1", "exit 0", gated=False))
    time.sleep(0.2)
    assert phase(fake, "p-1") == "Pending"


def sidecars(body: dict[str, Any], script: str) -> dict[str, Any]:
    """`body` with native sidecars s1 then s2, each running `script` with $NAME set to its name."""
    body["spec"]["initContainers"] = [
        {"name": name, "image": "busybox", "restartPolicy": "Always", "command": ["sh", "-c", script], "env": [{"name": "NAME", "value": name}]}
        for name in ("s1", "s2")]
    return body


def test_a_deleted_pods_sidecars_stop_after_its_containers_last_first(world: Any) -> None:
    """The 1.29+ kubelet's order (kuberuntime_termination_order.go): SIGTERM to the regular
    containers, then to each sidecar once the later ones have exited."""
    fake, _, lines = world
    trap = "trap 'echo $NAME-term; sleep 0.2; exit 0' TERM; echo up; sleep 300 & wait"
    body = sidecars(pod("p-0", trap.replace("$NAME", "main"), gated=False), trap)
    fake.create_pod(NS, body)
    until(lambda: len([line for _, line in lines if line == "up"]) == 3 and phase(fake, "p-0") == "Running")
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None)
    assert [line for _, line in lines if line.endswith("-term")] == ["main-term", "s2-term", "s1-term"]


def test_sidecars_told_once_the_grace_is_spent_get_two_seconds(world: Any) -> None:
    """Regular containers and sidecars that ignore SIGTERM: the regular one is killed when the
    grace (1 s) ends; the sidecars are then told at once and killed 2 s later (killContainer's
    minimumGracePeriodInSeconds), not at the grace's end nor one after the other."""
    fake, _, _ = world
    ignore = 'trap "" TERM; echo up; sleep 300 & wait'
    fake.create_pod(NS, sidecars(pod("p-0", ignore, grace=1, gated=False), ignore))
    until(lambda: phase(fake, "p-0") == "Running")
    started = time.monotonic()
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None, seconds=15)
    assert 2.9 < time.monotonic() - started < 5


def test_a_sidecar_that_exits_is_started_again_at_once_then_after_10s(world: Any) -> None:
    """The kubelet's container back-off (runtime/sim/timings.py): an exited native sidecar starts
    again at once, then 10 s after its next exit; meanwhile its exit is its state (restartPolicy
    Never shows no CrashLoopBackOff), the pod stays Running but not Ready."""
    fake, _, lines = world
    body = pod("p-0", "exec sleep 300", gated=False)
    body["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always", "command": ["sh", "-c", "echo up; sleep 0.3; exit 1"]}]
    fake.create_pod(NS, body)

    def side() -> dict[str, Any]:
        return ((stored(fake, "p-0").get("status") or {}).get("initContainerStatuses") or [{"restartCount": -1, "state": {}}])[0]

    def ready() -> str:
        return next(c["status"] for c in stored(fake, "p-0")["status"]["conditions"] if c["type"] == "Ready")

    until(lambda: side()["restartCount"] == 1 and "terminated" in side()["state"], seconds=5)
    started = time.monotonic()
    status = side()
    assert (status["state"]["terminated"]["exitCode"], status["lastState"]["terminated"]["exitCode"], status["ready"]) == (1, 1, False)
    assert phase(fake, "p-0") == "Running" and ready() == "False"
    until(lambda: side()["restartCount"] == 2 and "running" in side()["state"], seconds=15)
    assert 9 < time.monotonic() - started < 12 and ready() == "True"
    assert [line for label, line in lines if label == "p-0/side"] == ["up"] * 3
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None)


@pytest.mark.slow  # waits out one 10 s back-off
def test_a_sidecar_restart_that_cannot_start_is_a_start_error_retried_after_back_off(world: Any, tmp_path: Path) -> None:
    """A restart that cannot start (its binary gone) counts, shows StartError (exit code 128)
    with the exit before it as lastState, and is tried again after the back-off, as the kubelet
    keeps trying: once the binary is back the sidecar runs and the pod is Ready again."""
    fake, _, lines = world
    script = tmp_path / "side.sh"
    script.write_text('#!/bin/sh\necho up\nsleep 0.3\nrm -f "$0"\nexit 1\n')
    script.chmod(0o755)
    body = pod("p-0", "exec sleep 300", gated=False)
    body["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always", "command": [str(script)]}]
    fake.create_pod(NS, body)

    def side() -> dict[str, Any]:
        return ((stored(fake, "p-0").get("status") or {}).get("initContainerStatuses") or [{"restartCount": -1, "state": {}}])[0]

    until(lambda: side()["restartCount"] == 1 and "terminated" in side()["state"], seconds=5)
    failed = time.monotonic()
    status = side()
    assert (status["state"]["terminated"]["reason"], status["state"]["terminated"]["exitCode"]) == ("StartError", 128)
    assert status["lastState"]["terminated"]["exitCode"] == 1 and phase(fake, "p-0") == "Running"
    script.write_text("#!/bin/sh\necho back\nexec sleep 300\n")
    script.chmod(0o755)
    until(lambda: side()["restartCount"] == 2 and "running" in side()["state"], seconds=15)
    assert 9 < time.monotonic() - failed < 12
    assert side()["lastState"]["terminated"]["reason"] == "StartError"
    # Its output is read on a thread of its own: "running" can be stored before "back" is read.
    until(lambda: [line for label, line in lines if label == "p-0/side" and not line.startswith("flatjob")] == ["up", "back"], seconds=5)
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None)


def test_init_containers_run_in_the_pods_order_with_a_sidecar_started_in_its_turn(world: Any, tmp_path: Path) -> None:
    """A native sidecar before a regular init container runs while that init container does
    (computeInitContainerActions starts the next one once the sidecar runs): an init that needs
    its sidecar (a proxy, a mount helper) finds it up."""
    fake, _, lines = world
    flag = tmp_path / "side-up"
    body = pod("p-0", "echo main-up; exec sleep 300", gated=False)
    body["spec"]["initContainers"] = [
        {"name": "side", "image": "busybox", "restartPolicy": "Always", "command": ["sh", "-c", f"touch {flag}; exec sleep 300"]},
        {"name": "fetch", "image": "busybox", "command": ["sh", "-c", f"for i in $(seq 50); do [ -e {flag} ] && echo side-seen && exit 0; sleep 0.1; done; exit 3"]},
    ]
    fake.create_pod(NS, body)
    until(lambda: phase(fake, "p-0") == "Running" and "main-up" in [line for _, line in lines])
    assert [line for _, line in lines if line in ("side-seen", "main-up")] == ["side-seen", "main-up"]  # an init's output is read whole before the next starts
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None)


def test_an_init_container_failing_after_a_sidecar_started_stops_the_sidecar_and_fails_the_pod(world: Any) -> None:
    fake, _, lines = world
    body = pod("p-0", "echo main-up; exec sleep 300", gated=False)
    body["spec"]["initContainers"] = [
        {"name": "side", "image": "busybox", "restartPolicy": "Always", "command": ["sh", "-c", "trap 'echo side-term; exit 0' TERM; sleep 300 & wait"]},
        {"name": "fetch", "image": "busybox", "command": ["sh", "-c", "sleep 0.2; exit 3"]},
    ]
    fake.create_pod(NS, body)
    until(lambda: phase(fake, "p-0") == "Failed")
    assert pod_state(stored(fake, "p-0")).exit_code == 3
    until(lambda: "side-term" in [line for _, line in lines])  # the sidecar was told to stop (its output is read on a thread of its own)
    assert "main-up" not in [line for _, line in lines]


def test_a_sidecar_that_cannot_start_holds_the_regular_containers_back(world: Any, tmp_path: Path) -> None:
    """Its first start fails (StartError), so the kubelet tries it again after the back-off and
    starts nothing after it meanwhile; the pod, deleted while it waits, goes at once."""
    fake, _, lines = world
    body = pod("p-0", "echo main-up; exec sleep 300", gated=False)
    body["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always", "command": [str(tmp_path / "absent")]}]
    fake.create_pod(NS, body)
    until(lambda: len([line for _, line in lines if "cannot start" in line]) == 2)  # its first start, and the retry at once
    time.sleep(0.5)
    assert "main-up" not in [line for _, line in lines] and phase(fake, "p-0") == "Pending"
    started = time.monotonic()
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None, seconds=5)
    assert time.monotonic() - started < 3 and "main-up" not in [line for _, line in lines]


@pytest.mark.slow  # waits out one 10 s back-off
def test_a_sidecar_that_could_not_start_starts_after_its_back_off_and_then_the_regular_containers(world: Any, tmp_path: Path) -> None:
    fake, _, lines = world
    script = tmp_path / "side.sh"
    body = pod("p-0", "echo main-up; exec sleep 300", gated=False)
    body["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always", "command": [str(script)]}]
    fake.create_pod(NS, body)
    until(lambda: len([line for _, line in lines if "cannot start" in line]) == 2)
    failed = time.monotonic()
    script.write_text("#!/bin/sh\necho side-up\nexec sleep 300\n")
    script.chmod(0o755)
    until(lambda: phase(fake, "p-0") == "Running", seconds=15)
    assert 8 < time.monotonic() - failed < 12  # the regular container started only with the sidecar, after its back-off
    until(lambda: {"side-up", "main-up"} <= {line for _, line in lines})  # their outputs are read on threads of their own: in any order
    fake.delete_pod(NS, "p-0", stored(fake, "p-0")["metadata"]["uid"])
    until(lambda: stored(fake, "p-0") is None)
