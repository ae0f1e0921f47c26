"""run-local's pure pieces, without starting a job (fast; not marked e2e).

Covers: the kubelet-like environment (expansion order, $$ escapes, downward API with the
loopback podIP, Secret/ConfigMap references, --env, envFrom, resource fields), the command
line, inherited variables dropped; ConfigMap files and mount mapping; replica overrides
and refused kinds; the compile option that gives loopback addresses (and the PodTemplates
the runtime reads); the merged --rdzv_conf; a HOME the job sets, refused where the SSH pods' key links would
replace this machine's own ssh files; the pod status the local kubelet writes, as the
runtime reads it; the table rows.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest

from flatjob.compiler import keys
from flatjob.compiler.loader import Loaded, parse
from flatjob.compiler.options import CompileOptions
from flatjob.compiler.pipeline import compile_documents
from flatjob.runtime.job import job_view
from flatjob.runtime.local.compiling import compile_local, parse_replicas, with_replicas
from flatjob.runtime.local.environment import PodFacts, command_line, declared_env, process_env
from flatjob.runtime.local.errors import LocalError
from flatjob.runtime.local.files import config_mounts, map_paths, materialise, path_env
from flatjob.runtime.local.processes import Ended, Exited, shell_code
from flatjob.runtime.local.ssh import claim_block
from flatjob.runtime.local.ssh import preflight as ssh_preflight
from flatjob.runtime.local.table import (
    Screen,
    Seen,
    change_line,
    event_note,
    quiet_note,
    quiet_note_due,
    rows,
    title,
)
from flatjob.runtime.observe import pod_state
from flatjob.runtime.sim import podstatus

from .kit import free_port

ROOT = Path(__file__).resolve().parents[2]
POD = PodFacts("j-worker-1", "default", "uid-1", "127.0.1.2", "node", {keys.ATTEMPT: "2"}, {"app": "x"})


def env_of(env: list[dict], overrides: dict[str, str] | None = None, **kw: object) -> tuple[dict[str, str], list[str]]:
    return declared_env({"name": "c", "env": env, **kw}, POD, overrides or {})


def test_literal_values_expand_earlier_variables_in_order_and_keep_escapes() -> None:
    env, problems = env_of([
        {"name": "A", "value": "a"},
        {"name": "B", "value": "$(A)-$(C)-$$(A)"},  # C is declared later: stays as written
        {"name": "C", "value": "c"},
        {"name": "D"},
    ])
    assert problems == []
    assert env == {"A": "a", "B": "a-$(C)-$(A)", "C": "c", "D": ""}


def test_downward_api_gives_the_pods_loopback_address_name_and_annotations() -> None:
    def field(path: str) -> dict:
        return {"name": path, "valueFrom": {"fieldRef": {"fieldPath": path}}}

    env, problems = env_of([field("status.podIP"), field("metadata.name"), field(f"metadata.annotations['{keys.ATTEMPT}']"), field("metadata.labels['app']"), field("metadata.uid")])
    assert problems == []
    assert list(env.values()) == ["127.0.1.2", "j-worker-1", "2", "x", "uid-1"]


def test_secret_and_configmap_references_are_errors_unless_optional_or_given_with_env() -> None:
    refs = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode", "optional": True}}},
    ]
    env, problems = env_of(refs)
    assert env == {} and len(problems) == 1 and "TOKEN (from Secret 's', key 'token'; pass --env TOKEN=VALUE)" in problems[0]
    env, problems = env_of(refs, {"TOKEN": "t", "EXTRA": "e"})
    assert (env, problems) == ({"TOKEN": "t", "EXTRA": "e"}, [])


def test_env_from_needs_skip_env_from() -> None:
    container = {"envFrom": [{"secretRef": {"name": "creds"}}, {"configMapRef": {"name": "opt", "optional": True}}]}
    _, problems = declared_env(container, POD, {})
    assert len(problems) == 1 and "envFrom Secret 'creds'" in problems[0]
    assert declared_env(container, POD, {}, skip_env_from=True)[1] == []


def test_resource_fields_round_up_by_divisor() -> None:
    env, _ = env_of(
        [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
         {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}}],
        resources={"limits": {"cpu": "1500m", "memory": "2Gi"}},
    )
    assert env == {"CPU": "2", "MEM": "2048"}


def test_command_line_expands_and_needs_a_command() -> None:
    assert command_line({"command": ["python", "$(SCRIPT)"], "args": ["--x=$(X)"]}, {"SCRIPT": "t.py"}, "p") == ["python", "t.py", "--x=$(X)"]
    with pytest.raises(LocalError, match="sets no command"):
        command_line({"name": "c", "args": ["x"]}, {}, "p")


def test_process_env_drops_inherited_launcher_settings() -> None:
    base = {"PATH": "/bin", "MASTER_ADDR": "elsewhere", "PET_NNODES": "9", "RANK": "5", "HOME": "/root"}
    env = process_env(base, {"RANK": "0"}, "j-worker-1", {"FLATJOB_DIR": "/tmp/x"})
    assert env == {"PATH": "/bin", "HOME": "/root", "HOSTNAME": "j-worker-1", "FLATJOB_DIR": "/tmp/x", "RANK": "0"}


def test_configmap_files_are_written_and_mount_paths_mapped(tmp_path: Path) -> None:
    files = {"hostfile": "a slots=1\n", "launch.sh": "#!/bin/sh\n"}
    materialise(files, tmp_path / "config")
    assert (tmp_path / "config" / "hostfile").read_text() == "a slots=1\n"
    assert path_env(files, tmp_path) == {"FLATJOB_DIR": str(tmp_path), "FLATJOB_HOSTFILE": str(tmp_path / "hostfile")}
    assert path_env({}, tmp_path) == {}
    pod = {"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "j-config"}}, {"name": "data", "emptyDir": {}}]}}
    container = {"volumeMounts": [
        {"name": "cfg", "mountPath": "/flatjob"}, {"name": "cfg", "mountPath": "/t9k/hostfile", "subPath": "hostfile"},
        {"name": "data", "mountPath": "/data"},
    ]}
    mounts = config_mounts(pod, container, "j-config", tmp_path)
    assert mounts == {"/flatjob": str(tmp_path), "/t9k/hostfile": str(tmp_path / "hostfile")}
    assert map_paths(["/bin/sh", "/flatjob/launch.sh", "/t9k/hostfile", "/flatjobx", "/data/x"], mounts) == [
        "/bin/sh", f"{tmp_path}/launch.sh", f"{tmp_path}/hostfile", "/flatjobx", "/data/x",
    ]


def test_replicas_override_and_its_errors() -> None:
    assert parse_replicas(["worker=1", "master=0"]) == {"worker": 1, "master": 0}
    with pytest.raises(LocalError, match="expected TYPE=N"):
        parse_replicas(["worker"])
    doc = {"kind": "PyTorchTrainingJob", "spec": {"replicaSpecs": [{"type": "worker", "replicas": 4}]}}
    assert with_replicas(doc, {"worker": 1})["spec"]["replicaSpecs"][0]["replicas"] == 1
    assert doc["spec"]["replicaSpecs"][0]["replicas"] == 4  # the input is not changed
    with pytest.raises(LocalError, match=r"no replica type .node. .*types: worker"):
        with_replicas(doc, {"node": 1})


@pytest.mark.parametrize(("example", "first"), [("deepspeed.yaml", "gpt-neox-worker-0"), ("colossalai.yaml", "palm-launcher")])
def test_ssh_kinds_compile_with_loopback_hostfiles_in_a_block_of_their_own(example: str, first: str) -> None:
    (job,) = compile_local(str(ROOT / "examples" / example))
    try:
        ips = [job.address(p["metadata"]["name"]) for p in job.pods]
        block = int(ips[0].split(".")[2])
        assert ips == [f"127.0.{block}.{i + 1}" for i in range(len(ips))]
        assert job.pods[0]["metadata"]["name"] == first
        hosts = [ln.split()[0] for ln in job.files["hostfile"].splitlines()]
        workers = [job.address(p["metadata"]["name"]) for p in job.pods if "-worker-" in p["metadata"]["name"]]
        assert hosts == workers  # the launchers reach the workers at their loopback addresses
        again, lock = claim_block(len(ips), port=free_port())
        lock.close()
        assert again != block  # this run's block stays this run's while it runs
    finally:
        job.lock.close()


def test_claim_block_skips_held_blocks_and_taken_ports(tmp_path: Path) -> None:
    port = free_port()
    first, lock1 = claim_block(2, port=port, lock_dir=str(tmp_path))
    second, lock2 = claim_block(2, port=port, lock_dir=str(tmp_path))
    assert second > first
    lock1.close()
    with socket.socket() as taken:  # someone else's program on the first block's port
        taken.bind((f"127.0.{first}.2", port))
        third, lock3 = claim_block(2, port=port, lock_dir=str(tmp_path))
        assert third not in (first, second)
    lock2.close()
    lock3.close()


def test_ssh_preflight_names_every_missing_tool(tmp_path: Path) -> None:
    problems = ssh_preflight("DeepSpeedJob", str(tmp_path / "no-sshd"), {"PATH": str(tmp_path)})
    text = "\n".join(problems)
    assert f"sshd is not at {tmp_path / 'no-sshd'}" in text
    assert "ssh, ssh-keygen, pdsh, deepspeed not found on PATH" in text


@pytest.mark.parametrize(
    ("state", "given", "refused"),
    [
        # state of the HOME here       --env   refused
        ("own", True, True),  # your own home: never
        ("own", False, True),
        ("user", True, True),  # its .ssh is (through links) a user's of this machine
        ("user", False, True),
        ("replaced", True, True),  # its .ssh holds config or a key the links would replace
        ("replaced", False, True),
        ("not-a-folder", True, True),
        ("not-a-folder", False, True),
        ("full", True, True),  # a folder of files (HOME=/etc): its .ssh would be made among them
        ("full", False, True),
        ("empty", True, False),  # what you name on the command line for the pods
        ("empty", False, True),  # the job's author named it for a container, not for this machine
        ("missing", True, False),  # the pods make it, where you said
        ("missing", False, True),  # HOME=/workspace would be made on this machine
        ("earlier", True, False),  # only an earlier run's links: its own
        ("earlier", False, True),
    ],
)
def test_ssh_home_decision_table(state: str, given: bool, refused: bool) -> None:
    """run-local has the pods link keys outside its own folders only into a HOME you pass with
    --env that is an empty folder, not there yet, or holds an earlier run's links."""
    from flatjob.runtime.local.ssh import HOME_STATES, home_refused

    assert state in HOME_STATES
    assert home_refused(state, given) is refused


def test_ssh_home_check_judges_each_pods_home_on_this_machine(tmp_path: Path) -> None:
    """With ssh.authMountPath elsewhere, every SSH pod's script links the key pair and client
    config into $HOME/.ssh (`mkdir -p`, `rm -f`, `ln -s`).  A HOME the job's env or --env sets
    is this machine's folder here: a job with HOME=/root created this machine's /root/.ssh
    (review hx33), HOME=/etc made /etc/.ssh.  What each folder is found to be, and refused."""
    import os
    import tempfile

    from flatjob.runtime.local.containers import Options
    from flatjob.runtime.local.ssh import home_problems

    def pod(name: str, home: Path | str | None) -> dict:
        env = [{"name": "HOME", "value": str(home)}] if home else []
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "worker", "image": "x", "env": env}]}}

    def judged(home: Path | str | None, options: Options) -> list[str]:
        return home_problems([pod("j-worker-0", home)], {"j-worker-0": "worker"}, options, "/etc/keys")

    users, empty, again, me, full, a_file = (tmp_path / n for n in ("users", "empty", "again", "me", "full", "a-file"))
    (users / ".ssh").mkdir(parents=True)
    (users / ".ssh" / "id_ed25519").write_text("a key of the user's own\n")
    empty.mkdir()
    (again / ".ssh").mkdir(parents=True)
    (again / ".ssh" / "config").symlink_to(os.path.join(tempfile.gettempdir(), "flatjob-j-x", "pods", "ssh", "config"))  # an earlier run's
    full.mkdir()
    (full / "notes").write_text("the user's\n")
    a_file.write_text("not a folder\n")
    mine = Options(base_env={"HOME": str(me), "PATH": "/usr/bin"})

    def given(home: Path | str) -> Options:  # --env HOME=home
        return Options(env={"HOME": str(home)}, base_env=mine.base_env)

    for home in (empty, tmp_path / "fresh", again):  # accepted from --env ...
        assert judged(None, given(home)) == [], home
        (problem,) = judged(home, mine)  # ... and refused from the job's env
        assert problem.startswith(f"j-worker-0/worker: HOME={home} (the job's env): "), problem
        assert problem.endswith("pass --env HOME=<an empty folder>, or an --overlay that removes HOME"), problem
    for home, what in [
        (users, "its id_ed25519 would be replaced"),
        (me, "your own home"),
        (full, "in a folder that holds files of its own"),
        (a_file, "not a folder"),
    ]:
        (problem,) = judged(None, given(home))
        assert f"HOME={home} (--env): " in problem and f"this machine's {home / '.ssh'} ({what}); " in problem, problem
        assert problem.endswith("pass --env HOME=<an empty folder>"), problem
    (problem,) = judged("/etc", given("/etc"))  # HOME=/etc made /etc/.ssh here
    assert "this machine's /etc/.ssh (in a folder that holds files of its own)" in problem, problem
    assert home_problems([pod("j-worker-0", "/etc")], {"j-worker-0": "worker"}, mine, "/root/.ssh") == []  # the default: nothing is linked
    assert judged(None, mine) == []  # the pod's own home, in the run's folder
    # A home whose .ssh leads to a user's .ssh (that holds none of the linked names) would have
    # had the links made in the user's folder.
    (me / ".ssh").mkdir(parents=True)
    (me / ".ssh" / "authorized_keys").write_text("a key of the user's own\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".ssh").symlink_to(me / ".ssh")
    (problem,) = judged(None, given(linked))
    assert f"(the ssh folder of a user of this machine, {me / '.ssh'})" in problem, problem
    # A relative HOME is the working folder's, here run-local's own: run from your home, HOME=. is it.
    (problem,) = judged(None, Options(env={"HOME": "."}, base_env=mine.base_env, cwd=str(me)))
    assert f"this machine's {me / '.ssh'} (your own home)" in problem, problem
    assert judged(None, Options(env={"HOME": "empty"}, base_env=mine.base_env, cwd=str(tmp_path))) == []


def test_cli_refuses_a_colossalai_job_whose_launcher_would_read_this_machines_ssh_and_names_the_overlay(tmp_path: Path) -> None:
    """A worker template that sets HOME has launch.sh unset HOME on the launcher, so fabric
    reads the passwd entry's home: /root/.ssh in a cluster, the key mount, but this machine's
    own here, where the job's key never is (the launch failed "No authentication methods
    available" after trying the user's own keys).  run-local refuses it before anything
    starts, and the overlay it names runs the job (here only as far as a Secret nobody has)."""
    import re

    job = """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {name: cz}
        spec:
          torchConfig: {procPerWorker: 1, script: [train.py]}
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  containers:
                    - name: worker
                      image: x
                      env:
                        - {name: HOME, value: /workspace}
                        - {name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}
    """
    code, output = _cli(tmp_path, job)
    assert code == 2, output
    assert "cz: the worker template sets HOME, so launch.sh unsets HOME on the launcher" in output, output
    assert "Traceback" not in output
    (patch,) = re.findall(r"--overlay that removes that HOME, patches: (\[.*\])$", output, re.MULTILINE)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "overlay.yaml").write_text(f"patches: {patch}\n", encoding="utf-8")
    code, output = _cli(tmp_path, job, "--overlay", str(overlay))
    assert code == 2 and "cz-worker-0/worker: cannot resolve TOKEN" in output, output  # what still stops it here
    assert "worker template sets HOME" not in output, output
    # The plan: a worker template without HOME, and a DeepSpeedJob's (its worker-0 launches with its own HOME), are fine.
    from flatjob.runtime.local.ssh import launcher_home_problem

    deepspeed = """
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: DeepSpeedJob
        metadata: {name: dz}
        spec:
          config: {slotsPerWorker: 1, run: {python: [t.py]}}
          worker:
            replicas: 2
            template: {spec: {containers: [{name: worker, image: x, env: [{name: HOME, value: /workspace}]}]}}
    """
    for text, found in [(job, True), (job.replace("name: HOME", "name: NOT_HOME"), False), (deepspeed, False)]:
        docs, problems = parse(textwrap.dedent(text), "job.yaml")
        assert not problems
        plan = compile_documents(Loaded(jobs=docs), CompileOptions()).jobs[0].plan
        assert (launcher_home_problem(plan) is not None) is found, text


def test_local_compile_gives_loopback_addresses_and_hashes_the_runtime_agrees_with() -> None:
    (job,) = compile_local(str(ROOT / "examples" / "local" / "torchrun-cpu.yaml"), replicas={"node": 3})
    assert [job.address(p["metadata"]["name"]) for p in job.pods] == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
    assert job.record["metadata"]["annotations"][keys.RUNTIME_MODE] == keys.RUNTIME_MODE_NAMESPACE  # one runtime for every job
    command = job.pods[1]["spec"]["containers"][0]["command"]
    assert "--rdzv_endpoint=127.0.1.1:29500" in command and "--nnodes=3" in command
    assert "local_addresses" in job.record["metadata"]["annotations"][keys.OPTIONS]
    view = job_view(job.record, {t["metadata"]["name"]: t for t in job.templates})
    assert view.problem is None
    assert [p.name for p in view.pods] == [p["metadata"]["name"] for p in job.pods]
    assert [p.spec_hash for p in view.pods] == [p["metadata"]["annotations"][keys.SPEC_HASH] for p in job.pods]
    assert [o["kind"] for o in job.objects] == ["PyTorchTrainingJob", "PodTemplate", "PodTemplate", "PodTemplate"]


def _torchrun(extra: str, backend: str = "c10d") -> list[list[str]]:
    text = f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: PyTorchTrainingJob
        metadata: {{name: j}}
        spec:
          torchrunConfig: {{enabled: true, rdzvBackend: {backend}, extraOptions: {extra}}}
          replicaSpecs:
            - type: node
              replicas: 2
              template: {{spec: {{containers: [{{name: python, image: i, command: [python], args: [t.py]}}]}}}}
    """
    docs, problems = parse(textwrap.dedent(text), "job.yaml")
    assert not problems
    result = compile_documents(Loaded(jobs=docs), CompileOptions())
    assert not result.failed, [d.message for d in result.diagnostics]
    return [p.patch.command for p in result.jobs[0].plan.pods]


def test_a_users_rdzv_conf_is_merged_into_the_is_host_flag() -> None:
    first, second = _torchrun('["--rdzv_conf=last_call_timeout=1", "--monitor_interval=1"]')
    assert [a for a in first if a.startswith("--rdzv")][-1] == "--rdzv_conf=is_host=true,last_call_timeout=1"
    assert "--rdzv_conf=is_host=false,last_call_timeout=1" in second and "--monitor_interval=1" in second
    assert sum(a.startswith("--rdzv_conf") for a in second) == 1
    first, _ = _torchrun('["--rdzv-conf", "is_host=false,read_timeout=9"]')  # the user's is_host wins
    assert "--rdzv_conf=is_host=false,read_timeout=9" in first and "--rdzv-conf" not in first
    first, _ = _torchrun('["--monitor_interval=1"]')
    assert "--rdzv_conf=is_host=true" in first


def _pod(name: str = "j-worker-0") -> dict:
    return {
        "metadata": {"name": name, "uid": "u1", "annotations": {keys.ATTEMPT: "1"}},
        "spec": {"containers": [{"name": "python", "image": "i"}, {"name": "side", "image": "s"}], "initContainers": [{"name": "init", "image": "b"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
    }


def test_the_kubelets_status_is_what_the_runtime_reads() -> None:
    pod = _pod()
    pod["status"] = podstatus.running(pod, "127.0.1.1", ("python", "side"), 100.0, 101.0)
    state = pod_state(pod, "python")
    assert (state.phase, state.ready, state.exit_code, state.containers) == ("Running", True, None, (("python", "Running", None), ("side", "Running", None)))
    assert pod["status"]["podIP"] == "127.0.1.1" and {"type": "PodScheduled", "status": "True"} in pod["status"]["conditions"]
    summary = "torchrun failed\n  exitcode  : -9 (pid: 12)"
    how = Ended((Exited("python", 1, "Error", summary), Exited("side", 0, "Completed")), (Exited("init", 0, "Completed"),))
    pod["status"] = podstatus.ended(pod, "127.0.1.1", how, 100.0, 130.0)
    state = pod_state(pod, "python")
    assert (state.phase, state.ready, state.exit_code, state.reason, state.message) == ("Failed", False, 1, "Error", summary)
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_a_running_pods_native_sidecar_is_running_and_ready_beside_the_training_container() -> None:
    """run-local starts a native sidecar beside the regular containers: its status says so, and
    the pod is Ready, which counts sidecars (generate.go GenerateContainersReadyCondition)."""
    pod = _pod()
    pod["spec"]["initContainers"].append({"name": "shipper", "image": "s", "restartPolicy": "Always"})
    pod["status"] = podstatus.running(pod, "127.0.1.1", ("python", "side"), 100.0, 101.0)
    inits = {s["name"]: (next(iter(s["state"])), s["ready"], s["started"]) for s in pod["status"]["initContainerStatuses"]}
    assert inits == {"init": ("terminated", True, False), "shipper": ("running", True, True)}
    assert pod_state(pod, "python").ready


def test_a_failed_init_container_fails_the_pod_with_its_exit_code() -> None:
    pod = _pod()
    pod["spec"]["initContainers"].append({"name": "later", "image": "b"})
    pod["status"] = podstatus.ended(pod, "127.0.1.1", Ended((), (Exited("init", 3, "Error"),)), 100.0, 101.0)
    state = pod_state(pod, "python")
    assert (state.phase, state.exit_code, state.reason) == ("Failed", 3, "Init:Error")
    assert [s["state"] for s in pod["status"]["containerStatuses"]] == [{"waiting": {"reason": "PodInitializing"}}] * 2
    assert [(s["name"], next(iter(s["state"]))) for s in pod["status"]["initContainerStatuses"]] == [("init", "terminated"), ("later", "waiting")]
    initialized = next(c for c in pod["status"]["conditions"] if c["type"] == "Initialized")
    assert (initialized["status"], initialized["message"]) == ("False", "containers with incomplete status: [init later]")  # generate.go
    assert Ended((Exited("python", 0, "Completed"),), sidecars=(Exited("side", 143, "Error"),)).phase == "Succeeded"  # a sidecar's code does not count
    assert Ended((), error="bug").phase == "Failed"


def test_a_repeat_of_an_events_reason_is_noted_from_its_patch() -> None:
    """Two workers fail within 10 s: the runtime creates the Restarting Event for the first and
    patches its count and message for the second (runtime/events.py).  Only the creation was
    noted, so run-local showed the second worker fail and come back with no word of why."""
    counts: dict[str, int] = {}
    first = {"metadata": {"name": "sig.1"}, "reason": "Restarting", "count": 1, "message": "sig-worker-0 failed with exit code 143; restarting it (restart 1)"}
    assert event_note("ADDED", first, counts) == "Restarting: sig-worker-0 failed with exit code 143; restarting it (restart 1)"
    second = {**first, "count": 2, "message": "(combined from similar events): sig-worker-1 failed with exit code 137; restarting it (restart 1)"}
    assert event_note("MODIFIED", second, counts) == "Restarting: sig-worker-1 failed with exit code 137; restarting it (restart 1)"
    assert event_note("MODIFIED", second, counts) is None  # a write that adds no occurrence (a relabel, a resync)
    third = {**second, "count": 5}  # three held back in one window: the latest message, and how many more
    assert event_note("MODIFIED", third, counts) == "Restarting: sig-worker-1 failed with exit code 137; restarting it (restart 1) (and 2 more like it)"
    assert event_note("DELETED", third, counts) is None


def test_table_rows_and_plain_lines() -> None:
    seen = Seen()
    pod = _pod("j-worker-0")
    seen.apply("ADDED", pod)
    pod = {**pod, "status": podstatus.ended(pod, "127.0.1.1", Ended((Exited("python", 1, "Error"),)), 1.0, 2.0)}
    seen.apply("MODIFIED", pod)
    seen.apply("DELETED", pod)
    seen.apply("ADDED", {**_pod("j-worker-0"), "spec": {**pod["spec"], "schedulingGates": [{"name": keys.RELEASE_GATE}]}})
    for name in ("j-worker-2", "j-worker-3"):
        seen.apply("ADDED", _pod(name))
        seen.apply("DELETED", pod | {"metadata": {**pod["metadata"], "name": name}})
    status = {"tasks": [{"type": "worker", "replicas": [
        {"name": "j-worker-0", "phase": "Pending"}, {"name": "j-worker-1", "phase": "Creating"},
        {"name": "j-worker-2", "phase": "Running"}, {"name": "j-worker-3", "phase": "Creating"},
    ]}]}
    table = rows(status, seen, {"j-worker-0": "python"}, {"j-worker-0": "127.0.1.1"})
    assert table == [
        ("j-worker-0", "SchedulingGated", "1", "", "127.0.1.1"),  # created again: its restart, gated
        ("j-worker-1", "Creating", "-", "", ""),  # not created yet
        ("j-worker-2", "Deleted", "0", "1", ""),  # gone: how it ended (the status is older than the deletion)
        ("j-worker-3", "Creating", "0", "", ""),  # gone, to be created again: no exit code of the one before
    ]
    assert change_line(table[2]) == "flatjob: j-worker-2 Deleted, exit 1"
    waiting = {"phase": "Pending", "backoffCount": 2, "conditions": [{"type": "Reconciling", "status": "True", "message": "waiting for the workers' sshd to be ready"}]}
    assert title("DeepSpeedJob", "ds", waiting, 3.2) == "DeepSpeedJob ds: Pending (waiting for the workers' sshd to be ready), restarts 2, 3s"
    plain = {"phase": "Running", "conditions": [{"type": "Reconciling", "status": "True", "message": "The job is running."}]}
    assert title("DeepSpeedJob", "ds", plain, 0) == "DeepSpeedJob ds: Running, restarts 0, 0s"


def test_signal_deaths_are_reported_as_128_plus_the_signal() -> None:
    code = subprocess.run(["sh", "-c", "kill -9 $$"], check=False).returncode
    assert (shell_code(code), shell_code(-signal.SIGTERM), shell_code(3)) == (137, 143, 3)


def _cli(tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    from click.testing import CliRunner

    from flatjob.runtime.cli import run_local_command

    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent(text), encoding="utf-8")
    result = CliRunner().invoke(run_local_command, [str(job), *args])
    return result.exit_code, result.output


SECRET_JOB = """
    apiVersion: batch.tensorstack.dev/v1beta1
    kind: GenericJob
    metadata: {name: s}
    spec:
      replicaSpecs:
        - type: worker
          template:
            spec:
              containers:
                - name: main
                  image: busybox
                  command: [sh, -c, 'exit 0']
                  env:
                    - name: TOKEN
                      valueFrom: {secretKeyRef: {name: creds, key: token}}
"""


def test_cli_names_unresolvable_env_and_exits_2_before_running_anything(tmp_path: Path) -> None:
    code, output = _cli(tmp_path, SECRET_JOB)
    assert code == 2
    assert "s-worker-0/main: cannot resolve TOKEN (from Secret 'creds', key 'token'; pass --env TOKEN=VALUE)" in output


def test_cli_exits_2_before_an_ssh_pod_could_link_keys_over_a_users_own(tmp_path: Path) -> None:
    """The check above, wired into run-local: exit 2, every such pod named, nothing written."""
    home = tmp_path / "users"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host *\n  User me\n", encoding="utf-8")
    code, output = _cli(tmp_path, f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: ColossalAIJob
        metadata: {{name: c}}
        spec:
          ssh: {{authMountPath: /etc/keys}}
          torchConfig: {{procPerWorker: 1, script: [train.py]}}
          replicaSpecs:
            - type: worker
              replicas: 2
              template:
                spec:
                  containers:
                    - {{name: worker, image: x, env: [{{name: HOME, value: {home}}}]}}
    """)
    assert code == 2
    for pod in ("c-worker-0", "c-worker-1"):
        assert f"{pod}/worker: HOME={home} (the job's env)" in output
    assert f"this machine's {home / '.ssh'} (its config would be replaced)" in output
    assert (home / ".ssh" / "config").read_text(encoding="utf-8") == "Host *\n  User me\n" and not (home / ".ssh" / "config").is_symlink()


def test_cli_exits_2_for_specs_that_do_not_compile_and_for_bad_options(tmp_path: Path) -> None:
    code, output = _cli(tmp_path, "apiVersion: batch.tensorstack.dev/v1beta1\nkind: GenericJob\nmetadata: {name: x}\nspec: {}\n")
    assert code == 2 and "[FJ" in output
    code, output = _cli(tmp_path, SECRET_JOB, "--env", "TOKEN")
    assert code == 2 and "--env 'TOKEN': expected NAME=VALUE" in output
    code, output = _cli(tmp_path, SECRET_JOB, "--replicas-scale", "ps=1")
    assert code == 2 and "no replica type 'ps'" in output
    code, output = _cli(tmp_path, SECRET_JOB.replace("spec:\n      replicaSpecs:", "spec:\n      runMode: {pause: {enabled: true}}\n      replicaSpecs:", 1))
    assert code == 2 and "GenericJob s is paused (spec.runMode.pause.enabled)" in output


def test_a_container_ends_with_its_main_process_and_takes_only_its_own_processes(tmp_path: Path) -> None:
    import os
    import sys

    from flatjob.runtime.local.processes import Container, Launch, marked

    if not sys.platform.startswith("linux"):
        pytest.skip("needs /proc")
    lines: list[tuple[str, str]] = []

    def launch(mark: str, script: str) -> Container:
        c = Container(Launch("c", ("sh", "-c", script), dict(os.environ), str(tmp_path), "p", mark), lambda label, line: lines.append((label, line)))
        c.start()
        return c

    mark = f"test-{os.getpid()}/p/u"
    other = launch(f"{mark}/main2", "exec sleep 30")
    main = launch(f"{mark}/main", "setsid sleep 30 & echo started; sleep 0.2; exit 7")
    assert main.wait() == 7
    assert marked(f"{mark}/main") == []  # the grandchild in its own session went with it
    assert len(marked(f"{mark}/main2")) == 1  # another container's process did not
    other.kill()
    assert other.wait() == 137
    assert lines == [("p", "started")] and main.message() == "started"


def test_preflight_warns_of_a_program_that_is_not_on_path(tmp_path: Path) -> None:
    """A cluster whose image lacks the program fails the container (128) and restarts it by
    policy; run-local does the same, and says so before it starts."""
    from flatjob.runtime.local.containers import Options, preflight

    pod = {"metadata": {"name": "p-0"}, "spec": {"containers": [
        {"name": "missing", "image": "x", "command": ["definitely-not-a-program-here"]},
        {"name": "found", "image": "x", "command": ["sh", "-c", "true"]},
        {"name": "absolute", "image": "x", "command": ["/bin/sh", "-c", "true"]},
    ]}}
    errors, warnings = preflight([pod], {"p-0": None}, Options(cwd=str(tmp_path), base_env={"PATH": "/usr/bin:/bin"}))
    assert errors == []
    assert [w.split(":")[0] for w in warnings] == ["p-0/missing"]
    assert "definitely-not-a-program-here is not on PATH here" in warnings[0]


def test_preflight_warns_of_a_script_that_is_not_where_the_job_says(tmp_path: Path) -> None:
    """A job's script paths are relative to where flatjob runs (no image here): one that is not
    a file there fails only after the restarts' back-off; run-local says so before it starts."""
    from flatjob.runtime.local.containers import Options, preflight

    (tmp_path / "train.py").write_text("")
    pod = {"metadata": {"name": "p-0"}, "spec": {"containers": [
        {"name": "missing", "image": "x", "command": ["sh", "-c", "true"], "args": ["examples/local/allreduce.py"]},
        {"name": "found", "image": "x", "command": ["sh", "-c", "true"], "args": ["train.py", "--lr", "0.1"]},
        {"name": "flag", "image": "x", "command": ["sh", "-c", "true"], "args": ["--config=x.py"]},
        {"name": "shell-string", "image": "x", "command": ["sh", "-c"], "args": ["python train.py --lr 0.1"]},  # T9k's usual form
    ]}}
    errors, warnings = preflight([pod], {"p-0": None}, Options(cwd=str(tmp_path), base_env={"PATH": "/usr/bin:/bin"}))
    assert errors == [] and [w.split(":")[0] for w in warnings] == ["p-0/missing"]
    assert f"examples/local/allreduce.py is not a file in {tmp_path}" in warnings[0]


def test_preflight_says_an_absolute_script_path_is_missing_on_this_machine(tmp_path: Path) -> None:
    """`python /workspace/train.py` (examples/pytorch-ddp.yaml, a path in the image or a volume)
    was "not a file in <the current folder> (relative paths resolve from there)": it is not relative."""
    from flatjob.runtime.local.containers import Options, preflight

    (tmp_path / "here.py").write_text("")
    pod = {"metadata": {"name": "p-0"}, "spec": {"containers": [
        {"name": "image", "image": "x", "command": ["python", str(tmp_path / "workspace" / "train.py")]},
        {"name": "local", "image": "x", "command": ["python", str(tmp_path / "here.py")]},
    ]}}
    errors, warnings = preflight([pod], {"p-0": None}, Options(cwd=str(tmp_path), base_env={"PATH": os.environ["PATH"]}))
    assert errors == [] and [w.split(":")[0] for w in warnings] == ["p-0/image"]
    assert warnings[0] == (
        f"p-0/image: {tmp_path / 'workspace' / 'train.py'} is not a file on this machine (no image, no volume is mounted here): "
        "put it there, or point the job at a local copy with --overlay"
    )


def test_the_block_lock_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    """In a shared /tmp anyone may plant the lock file as a link: root's run-local opened it and
    created what it names (review of round 14); a link or someone else's file is skipped."""
    from flatjob.runtime.local.errors import Unsupported
    from flatjob.runtime.local.ssh import claim_block

    from .kit import free_port

    locks = tmp_path / "tmp"  # stands for /tmp (fs.protected_symlinks is 0 on this machine)
    locks.mkdir()
    locks.chmod(0o1777)
    victims = tmp_path / "victims"
    victims.mkdir()
    for block in range(1, 255):
        (locks / f"flatjob-run-local-127.0.{block}.lock").symlink_to(victims / f"made-by-run-local-{block}")
    with pytest.raises(Unsupported):  # every block's lock file is a planted link
        claim_block(1, port=free_port(), lock_dir=str(locks))
    assert not list(victims.iterdir()), "claim_block created the file a planted symlink names"


@pytest.mark.parametrize(("quiet", "notes", "due"), [
    (59, 0, False), (60, 0, True), (119, 1, False), (120, 1, True), (240, 2, True), (599, 4, False), (600, 9, True),
])
def test_a_silent_run_says_so_after_60s_then_doubling_to_10_minutes(quiet: float, notes: int, due: bool) -> None:
    assert quiet_note_due(quiet, notes) is due


def test_the_quiet_note_names_each_job_its_pods_and_how_to_end_the_run() -> None:
    """A torchrun job whose node-1 reached its restart limit while node-0 hangs in gloo: the log
    says so instead of nothing for as long as it hangs."""
    sections = [("PyTorchTrainingJob slowrun: Running, restarts 3, 700s", [
        ("slowrun-node-0", "Running", "3", "", "127.0.1.1"), ("slowrun-node-1", "Failed", "3", "1", "127.0.1.2")])]
    assert quiet_note(sections, 61.5) == (
        "nothing new for 62s: PyTorchTrainingJob slowrun: Running, restarts 3, 700s "
        "(slowrun-node-0 Running, restart 3; slowrun-node-1 Failed, exit 1, restart 3). "
        "Ctrl-C stops the run; --timeout SECONDS ends one by itself")


def test_the_screen_dates_what_it_prints_for_the_quiet_note() -> None:
    import io
    import time

    screen = Screen(io.StringIO(), io.StringIO(), live=False)
    before = screen.written
    time.sleep(0.01)
    screen.log("p", "hello")
    assert screen.written > before
