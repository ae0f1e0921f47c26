"""Plan a DeepSpeedJob: every worker runs sshd; worker-0 waits for them, then runs deepspeed.

T9k has no launcher pod: worker-0 launches (pdsh over ssh to every hostfile host, itself
included).  The deepspeed command line is built from spec.config field by field; see
docs/architecture.md for the mapping and the paths.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..jobtypes import DeepSpeedJob
from ..options import CompileOptions
from ..podtemplate import containers_of
from ..render.configmap import configmap_name
from . import JobPlan, PodPlan, scripts, ssh
from .common import base_pods, elastic_of, layout, mode_patch, run_mode_name

MASTER_PORT = 29500
ENV_FILE = "/root/.deepspeed_env"
LAUNCH_SCRIPT, SSHD_SCRIPT = ssh.LAUNCH_SCRIPT, ssh.SSHD_SCRIPT
RUN_FLAGS = {"python": [], "module": ["--module"], "exec": ["--no_python"]}
# T9k's default debug command for DeepSpeedJob is `/usr/sbin/sshd -D`; flatjob's sshd script
# runs exactly that sshd (ssh.sshdPath, -D, -e) after generating the pod's host keys.
DEBUG_COMMAND = tuple(ssh.script_command(SSHD_SCRIPT))


def _flag_names(args: list[str]) -> set[str]:
    return {a.split("=", 1)[0] for a in args if a.startswith("-")}


def deepspeed_args(job: DeepSpeedJob, master_addr: str) -> list[str]:
    """deepspeed's arguments after --hostfile (spec.config mapped flag by flag)."""
    cfg = job.spec.config
    own = _flag_names(cfg.other_args)
    argv: list[str] = []
    if "--master_addr" not in own:
        argv.append(f"--master_addr={master_addr}")
    if "--master_port" not in own:
        argv.append(f"--master_port={MASTER_PORT}")
    if not cfg.local_rank:
        argv.append("--no_local_rank")
    if cfg.autotune != "none":
        argv.append(f"--autotuning={cfg.autotune}")
    e = elastic_of(job)
    if e is not None:
        argv += ["--elastic_training", f"--min_elastic_nodes={e.min_replicas}", f"--max_elastic_nodes={e.max_replicas}"]
    run_kind, program = next(((k, getattr(cfg.run, k)) for k in RUN_FLAGS if cfg.run is not None and getattr(cfg.run, k) is not None), ("python", []))
    argv += RUN_FLAGS[run_kind]
    argv += cfg.other_args
    argv += program
    return argv


def hostfile(pods: list[PodPlan], slots: int) -> str:
    """One `<address> slots=<n>` line per worker, in rank order."""
    return "".join(f"{p.address} slots={slots}\n" for p in pods)


def env_names(template: dict[str, Any], container: int | None) -> list[str]:
    """Env var names the training container declares (forwarded through the env file)."""
    if container is None:
        return []
    env = containers_of(template)[container].get("env") or []
    return [e["name"] for e in env if isinstance(e, dict) and isinstance(e.get("name"), str)]


def launch_script(job: DeepSpeedJob, pod: PodPlan, master_addr: str) -> str:
    """worker-0's script: sshd (in the background), env file, wait for peers, then deepspeed."""
    cfg = job.spec.config
    e = elastic_of(job)
    body = [
        scripts.header(),
        f"# DeepSpeedJob {job.metadata.name}: worker-0 runs deepspeed, which starts the training\n"
        "# processes on every host in the hostfile (this one included) over ssh (pdsh).\n",
        scripts.traps(),
        scripts.sshd_setup(job.spec.ssh.sshd_path, foreground=False),
    ]
    if not job.spec.disable_custom_env:
        body.append(scripts.env_file(env_names(pod.template, pod.container), f'"${{DS_ENV_FILE:-{ENV_FILE}}}"'))
    body.append(scripts.wait_for_peers(e.min_replicas if e is not None else None))
    run_hostfile = '"$FLATJOB_RUN_HOSTFILE"' if e is not None else '"$FLATJOB_HOSTFILE"'
    if cfg.custom_command is not None:
        body.append(
            "# spec.config.customCommand, run as written; its hostfile is $FLATJOB_HOSTFILE_IN_USE.\n"
            f"export FLATJOB_HOSTFILE_IN_USE={run_hostfile}\n"
        )
        launch = f"/bin/sh -c {scripts.quote([cfg.custom_command])}"
    else:
        body.append(
            "# deepspeed, its flags from spec.config. --master_addr is worker-0's DNS name (else the\n"
            "# runner ssh-es in for `hostname -I`). A child (&, wait), so the traps see SIGTERM.\n"
        )
        launch = f"deepspeed --hostfile={run_hostfile} {scripts.quote(deepspeed_args(job, master_addr))}"
    body.append(scripts.background(launch))
    return "".join(body)


def plan_deepspeed(job: DeepSpeedJob, options: CompileOptions) -> JobPlan:
    """Plan the workers of a DeepSpeedJob, their ssh wiring and worker-0's launch."""
    name = job.metadata.name
    lay = layout(job, [("worker", job.spec.worker.replicas, job.spec.worker.template)])
    pods = base_pods(job, lay, name)
    mode = run_mode_name(job.spec.run_mode)
    cm = configmap_name(name)
    files: dict[str, str] = {}
    if pods:
        files = ssh.shared_files(job, hostfile(pods, job.spec.config.slots_per_worker), launch_script(job, pods[0], pods[0].address))
    mounts = ssh.volume_mounts(job.spec.ssh.auth_mount_path)
    planned = []
    for pod in pods:
        launcher = pod.index == 0
        patch = ssh.sshd_patch(mounts, LAUNCH_SCRIPT if launcher else SSHD_SCRIPT)
        patch, drop, skip = mode_patch(job.spec.run_mode, pod.type, DEBUG_COMMAND, patch)
        role, wave = ("launcher", 1) if launcher and mode != "debug" else ("launcher" if launcher else "worker", 0)
        planned.append(replace(pod, patch=patch, volumes=ssh.volumes(job, cm), drop_init_containers=drop, skip_init_on_resume=skip, role=role, wave=wave))
    return ssh.job_plan(job, options, planned, files, mode)
