"""Properties of compiled DeepSpeedJobs and ColossalAIJobs, over random valid jobs.

Covers, for every drawn job compiled through the real pipeline (YAML text in, emitted files
read back):
- the DeepSpeed hostfile lists every worker pod exactly once, in rank order, as
  `<hostname>.<subdomain> slots=<slotsPerWorker>`, and parses with DeepSpeed's own rule
  (`^(\\S+)\\s+slots=(\\d+)`, no duplicates) and with the waiter's;
- the ColossalAI hostfile lists every worker once (never the launcher) and parses with
  ColossalAI's rule (one host per line, no duplicates);
- ColossalAI's older launcher/worker shape and the newer torchConfig/replicaSpecs shape,
  converted by hand as T9k documents it, normalize to the same canonical job and render the
  same files (pods, ConfigMap, record, everything);
- no output holds private key material and no Secret is rendered (keys are made in the
  cluster); every pod mounts the job's SSH Secret (or the one the annotation names);
- arbitrary text in run args reaches deepspeed's argv intact through a real POSIX shell.
"""

from __future__ import annotations

import copy
import re
import subprocess
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from manifestkit import objects_of, pods_of, secret_problems
from propertykit import examples
from scriptkit import API, compile_job
from strategies import env_names, images, job_names, namespaces, scalars

from flatjob.compiler.loader import parse
from flatjob.compiler.normalize import normalize
from flatjob.compiler.plan.scripts import LAUNCH_ENV, WAIT_FOR_PEERS_PY
from flatjob.compiler.validate import validate_document

PROPS = settings(
    max_examples=examples(40), derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
DEEPSPEED_LINE = re.compile(r"^(\S+)\s+slots=(\d+)")  # deepspeed/launcher/runner.py _parse_hostfile
ARGS = st.lists(
    # plain words: the others are refused at lint (FJ340), and test_any_text_reaches_deepspeed_argv_through_sh renders them anyway
    st.sampled_from(["--lr", "0.1", "--x=1", "a.b", "k:v", "50%", "@file"]), max_size=4
)
SCRIPTS = st.lists(st.sampled_from(["--config", "c.py", "1e3", "yes"]), max_size=3).map(
    lambda a: ["train.py", *a]
)


def waiter_hosts(text: str, tmp: Any) -> list[str]:
    """Hosts as the generated wait_for_peers.py reads a hostfile."""
    ns: dict[str, Any] = {"__name__": "wait_for_peers"}
    exec(compile(WAIT_FOR_PEERS_PY, "wait_for_peers.py", "exec"), ns)
    path = tmp / "hostfile"
    path.write_text(text, encoding="utf-8")
    return ns["hosts"](str(path))


# --- strategies ----------------------------------------------------------------------------


@st.composite
def worker_container(draw: st.DrawFn, *, name: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": draw(images)}
    if draw(st.booleans()):
        c["workingDir"] = draw(st.sampled_from(["/workspace", "/w/x"]))
    if draw(st.booleans()):
        c["imagePullPolicy"] = draw(st.sampled_from(["Always", "IfNotPresent"]))
    env = draw(st.dictionaries(env_names, scalars, max_size=3))
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if draw(st.booleans()):
        c["resources"] = {"limits": {"nvidia.com/gpu": draw(st.integers(1, 8))}}
    return c


@st.composite
def worker_template(draw: st.DrawFn) -> dict[str, Any]:
    containers = [draw(worker_container(name="worker"))]
    if draw(st.booleans()):
        containers.insert(draw(st.integers(0, 1)), {"name": "sidecar", "image": "busybox:1.36"})
    spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        spec["imagePullSecrets"] = [{"name": "regcred"}]
    return {"spec": spec}


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": draw(job_names)}
    ns = draw(st.none() | namespaces)
    if ns is not None:
        meta["namespace"] = ns
    if draw(st.booleans()):
        meta["annotations"] = {"flatjob.dev/ssh-secret": "team-ssh"}
    return meta


@st.composite
def ssh(draw: st.DrawFn) -> dict[str, Any]:
    return draw(
        st.sampled_from([{}, {"authMountPath": "/home/u/.ssh"}, {"sshdPath": "/opt/bin/sshd"}])
    )


@st.composite
def deepspeed_jobs(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = {"slotsPerWorker": draw(st.integers(1, 8))}
    if draw(st.integers(0, 4)) == 0:
        config["customCommand"] = "deepspeed --hostfile $FLATJOB_HOSTFILE_IN_USE t.py"
    else:
        config["run"] = {draw(st.sampled_from(["python", "module", "exec"])): ["prog", *draw(ARGS)]}
    config["localRank"] = draw(st.booleans())
    config["autotune"] = draw(st.sampled_from(["none", "tune", "run"]))
    config["otherArgs"] = draw(
        st.lists(st.sampled_from(["--bind_cores_to_rank", "--master_port=1234"]), unique=True)
    )
    spec: dict[str, Any] = {
        "config": config,
        "ssh": draw(ssh()),
        "disableCustomEnv": draw(st.booleans()),
    }
    replicas = draw(st.integers(1, 6))
    if draw(st.booleans()):
        lo = draw(st.integers(1, 3))
        spec["elastic"] = {
            "enabled": True,
            "minReplicas": lo,
            "maxReplicas": draw(st.integers(lo, 6)),
        }
    spec["worker"] = {"replicas": replicas, "template": draw(worker_template())}
    return {"apiVersion": API, "kind": "DeepSpeedJob", "metadata": draw(metadata()), "spec": spec}


@st.composite
def colossalai_old_shape(draw: st.DrawFn) -> dict[str, Any]:
    """A ColossalAIJob in the older shape: optional launcher, worker with command/torchArgs."""
    spec: dict[str, Any] = {"ssh": draw(ssh())}
    if draw(st.booleans()):
        launcher: dict[str, Any] = {}
        if draw(st.booleans()):
            launcher["image"] = "launcher:1"
        if draw(st.booleans()):
            launcher["workingDir"] = "/launch"
        if draw(st.booleans()):
            launcher["env"] = [{"name": "L", "value": draw(scalars)}]
        if draw(st.booleans()):
            launcher["resources"] = {"limits": {"cpu": "1"}}
        spec["launcher"] = launcher
    worker: dict[str, Any] = {"replicas": draw(st.integers(1, 5)), "command": draw(SCRIPTS)}
    if draw(st.booleans()):
        worker["procPerWorker"] = draw(st.integers(1, 8))
    if draw(st.booleans()):
        worker["torchArgs"] = draw(st.sampled_from([["--max_restarts", "0"], ["--a=1", "--b"]]))
    worker["template"] = draw(worker_template())
    spec["worker"] = worker
    if draw(st.booleans()):
        spec["runPolicy"] = {"cleanUpWorkers": draw(st.booleans())}
    return {"apiVersion": API, "kind": "ColossalAIJob", "metadata": draw(metadata()), "spec": spec}


def to_new_shape(
    job: dict[str, Any], *, explicit_launcher: bool, launcher_last: bool
) -> dict[str, Any]:
    """The same job in the newer shape, by T9k's description: torchConfig takes the worker's
    procPerWorker/command/torchArgs; the launcher container (named launcher) takes the older
    launcher's fields, else the worker container's image and workingDir (plus its pull policy
    and the pod's pull secrets); with no older launcher it may be left to the default."""
    new = copy.deepcopy(job)
    spec = new["spec"]
    worker, launcher = spec.pop("worker"), spec.pop("launcher", None)
    spec["torchConfig"] = {
        "procPerWorker": worker.get("procPerWorker", 1),
        "script": worker["command"],
        "extraArgs": worker.get("torchArgs", []),
    }
    specs = [{"type": "worker", "replicas": worker["replicas"], "template": worker["template"]}]
    if launcher is not None or explicit_launcher:
        launcher = launcher or {}
        wc = next(c for c in worker["template"]["spec"]["containers"] if c["name"] == "worker")
        c: dict[str, Any] = {"name": "launcher", "image": launcher.get("image", wc["image"])}
        if launcher.get("workingDir", wc.get("workingDir")):
            c["workingDir"] = launcher.get("workingDir", wc.get("workingDir"))
        for key in ("env", "resources"):
            if launcher.get(key):
                c[key] = launcher[key]
        if "imagePullPolicy" in wc:
            c["imagePullPolicy"] = wc["imagePullPolicy"]
        pod: dict[str, Any] = {"containers": [c]}
        if "imagePullSecrets" in worker["template"]["spec"]:
            pod["imagePullSecrets"] = worker["template"]["spec"]["imagePullSecrets"]
        launcher_spec = {"type": "launcher", "replicas": 1, "template": {"spec": pod}}
        specs = [*specs, launcher_spec] if launcher_last else [launcher_spec, *specs]
    spec["replicaSpecs"] = specs
    return new


# --- hostfiles -----------------------------------------------------------------------------


def worker_addresses(objects: list[dict[str, Any]], job: str) -> list[str]:
    pods = [p for p in pods_of(objects) if p["metadata"]["name"] != f"{job}-launcher"]
    pods.sort(key=lambda p: int(p["metadata"]["labels"]["flatjob.dev/replica-index"]))
    return [f"{p['spec']['hostname']}.{p['spec']['subdomain']}" for p in pods]


@PROPS
@given(job=deepspeed_jobs())
def test_deepspeed_hostfile_lists_every_worker_once_with_its_slots(
    job: dict[str, Any], tmp_path_factory: Any
) -> None:
    c = compile_job(job)
    text = c.data["hostfile"]
    slots = job["spec"]["config"]["slotsPerWorker"]
    elastic = job["spec"].get("elastic")
    workers = elastic["maxReplicas"] if elastic else job["spec"]["worker"]["replicas"]
    addresses = worker_addresses(c.objects, job["metadata"]["name"])
    assert len(addresses) == workers
    parsed = []
    for line in text.splitlines():
        m = DEEPSPEED_LINE.match(line.strip())
        assert m, f"DeepSpeed rejects the line {line!r}"
        parsed.append((m.group(1), int(m.group(2))))
    hosts = [h for h, _ in parsed]
    assert len(set(hosts)) == len(hosts), "DeepSpeed rejects duplicate hosts"
    assert parsed == [(a, slots) for a in addresses]
    assert waiter_hosts(text, tmp_path_factory.mktemp("h")) == addresses


@PROPS
@given(job=colossalai_old_shape())
def test_colossalai_hostfile_lists_every_worker_once(
    job: dict[str, Any], tmp_path_factory: Any
) -> None:
    c = compile_job(job)
    text = c.data["hostfile"]
    hosts = [ln.strip() for ln in text.splitlines() if ln.strip()]  # colossalai fetch_hostfile
    assert len(set(hosts)) == len(hosts)
    name = job["metadata"]["name"]
    assert hosts == worker_addresses(c.objects, name)
    assert len(hosts) == job["spec"]["worker"]["replicas"]
    assert f"{name}-launcher.{name}" not in hosts
    assert text == "".join(f"{h}\n" for h in hosts)
    assert waiter_hosts(text, tmp_path_factory.mktemp("h")) == hosts


# --- ColossalAI shapes ---------------------------------------------------------------------


def canonical(job: dict[str, Any]) -> dict[str, Any]:
    """The normalized job model, as plain data."""
    (doc,), problems = parse(yaml.safe_dump(job, allow_unicode=True), "job.yaml")
    assert not problems
    validated = validate_document(doc)
    assert validated.ok, [d.message for d in validated.diagnostics]
    return normalize(validated.job).wire()


@PROPS
@given(job=colossalai_old_shape(), explicit=st.booleans(), last=st.booleans())
def test_colossalai_shapes_normalize_and_render_the_same(
    job: dict[str, Any], explicit: bool, last: bool
) -> None:
    new = to_new_shape(job, explicit_launcher=explicit, launcher_last=last)
    old_out, new_out = compile_job(job), compile_job(new)
    assert canonical(job) == canonical(new)
    assert old_out.files.keys() == new_out.files.keys()
    for rel in old_out.files:
        assert old_out.files[rel] == new_out.files[rel], rel


# --- no key material -------------------------------------------------------------------------


@PROPS
@given(job=st.one_of(deepspeed_jobs(), colossalai_old_shape()))
def test_no_private_key_and_every_pod_mounts_the_ssh_secret(job: dict[str, Any]) -> None:
    c = compile_job(job)
    assert secret_problems(c.files) == []
    assert not [o for o in objects_of(c.files) if o["kind"] == "Secret"]
    secret = (
        job["metadata"].get("annotations", {}).get("flatjob.dev/ssh-secret")
        or f"{job['metadata']['name']}-ssh"
    )
    for pod in pods_of(c.objects):
        (vol,) = [v for v in pod["spec"]["volumes"] if v["name"] == "flatjob-ssh"]
        sources = vol["projected"]["sources"]
        assert sources[0]["secret"]["name"] == secret
        cs = pod["spec"]["containers"]
        trains = next((cc for cc in cs if cc["name"] in ("worker", "launcher")), cs[0])
        (mount,) = [m for m in trains["volumeMounts"] if m["name"] == "flatjob-ssh"]
        assert mount["mountPath"] == job["spec"]["ssh"].get("authMountPath", "/root/.ssh")


# --- quoting through a real shell ---------------------------------------------------------------

# Any text YAML can carry and argv can hold: no NUL, no surrogates.
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@settings(max_examples=examples(50), derandomize=True, deadline=None)
@given(args=st.lists(TEXT, max_size=5))
@example(
    args=["\x85", "\u2028 \u2029", "\r\n", "'\"\\$`", "\t", "\x1b[0m", "\ufeff", "\x7f", "\x01"]
)
@example(args=["", " ", "\n", "- x", "#", "%", "&&", "${X?}", "*"])
def test_any_text_reaches_deepspeed_argv_through_sh(args: list[str]) -> None:
    job = {
        "apiVersion": API,
        "kind": "DeepSpeedJob",
        "metadata": {"name": "j"},
        "spec": {
            "config": {"run": {"python": ["t.py", *args]}},
            "worker": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "worker", "image": "i"}]}},
            },
        },
    }
    script = compile_job(job, refused=frozenset({"FJ340"})).data["launch.sh"]  # lint refuses most of them: the script is safe anyway
    start = script.index(f"\n{LAUNCH_ENV}deepspeed ") + 1 + len(LAUNCH_ENV)  # the launcher's own words
    command = script[start : script.index(' &\nchild=$!\nwait "$child"\n', start)]
    probe = "deepspeed() { for a; do printf '%s\\0' \"$a\"; done; }\n" + command
    out = subprocess.run(
        ["/bin/sh", "-c", probe], capture_output=True, env={"FLATJOB_HOSTFILE": "/h"}, check=True
    ).stdout
    argv = out.decode("utf-8").split("\0")[:-1]
    assert argv[-len(args) - 1 :] == ["t.py", *args]
