"""Plan a DeepSpeedJob: every worker runs sshd; worker-0 waits for them, then runs deepspeed.

T9k has no launcher pod: worker-0 launches (pdsh over ssh to every hostfile host, itself
included).  The deepspeed command line is built from spec.config field by field; see
docs/architecture.md for the mapping and the paths.
"""

from __future__ import annotations

from dataclasses import replace

from ..jobtypes import DeepSpeedConfig, DeepSpeedJob
from ..options import CompileOptions
from ..render.configmap import configmap_name
from . import JobPlan, PodPlan, pdsh, scripts, ssh, sshd
from .common import base_pods, elastic_of, layout, mode_patch, run_mode_name

MASTER_PORT = 29500
LAUNCH_SCRIPT, SSHD_SCRIPT = ssh.LAUNCH_SCRIPT, ssh.SSHD_SCRIPT
RUN_FLAGS = {"python": [], "module": ["--module"], "exec": ["--no_python"]}
# T9k's default debug command for DeepSpeedJob is `/usr/sbin/sshd -D`; flatjob's sshd script
# runs exactly that sshd (ssh.sshdPath, -D, -e) after generating the pod's host keys.
DEBUG_COMMAND = tuple(ssh.script_command(SSHD_SCRIPT))


def _flag_names(args: list[str]) -> set[str]:
    return {a.split("=", 1)[0] for a in args if a.startswith("-")}


# DeepSpeed's add_export strips a value and wraps it in double quotes it does not escape, and
# pdsh replaces %h, %u, %n and %% in the command (src/common/pipecmd.c; hx13).
UNQUOTABLE = f'*[\\"\\$\\`\\\\]* | *"$nl"* | [[:space:]]* | *[[:space:]] | {scripts.PDSH_FORMATS[0]}'


def run_program(cfg: DeepSpeedConfig) -> tuple[str, list[str]]:
    """Which of config.run's forms the job uses (python, module or exec) and its words."""
    return next(((k, list(getattr(cfg.run, k))) for k in RUN_FLAGS if cfg.run is not None and getattr(cfg.run, k) is not None), ("python", []))


def deepspeed_args(job: DeepSpeedJob, master_addr: str) -> list[str]:
    """deepspeed's arguments after --hostfile (spec.config mapped flag by flag).

    No elastic flags: --elastic_training and --min/max_elastic_nodes exist from deepspeed 0.7.0
    to 0.19.7 only, and pdsh starts a fixed host list anyway; an elastic job's size is the
    hosts that answered (docs/architecture.md).  --force_multi: one worker runs through pdsh
    and ssh like many (the same environment, exit codes and quoting).
    """
    cfg = job.spec.config
    own = _flag_names(cfg.other_args)
    argv: list[str] = []
    if "--master_addr" not in own:
        argv.append(f"--master_addr={master_addr}")
    if "--master_port" not in own:
        argv.append(f"--master_port={MASTER_PORT}")
    if "--force_multi" not in own:
        argv.append("--force_multi")
    if not cfg.local_rank:
        argv.append("--no_local_rank")
    if cfg.autotune != "none":
        argv.append(f"--autotuning={cfg.autotune}")
    run_kind, program = run_program(cfg)
    argv += RUN_FLAGS[run_kind]
    argv += cfg.other_args
    argv += program
    return argv


# What deepspeed and pdsh read from their environment as configuration, not data: an env file
# whose lines deepspeed pastes into every node's shell (DS_ENV_FILE), the PATH pdsh puts before
# every node's command (DSHPATH), ssh options that may run commands, the remote command module,
# where modules load from (reviews of rounds 14 and 15).  launch.sh unsets them and lint refuses
# them (FJ346).
LAUNCHER_ENV = ("DS_ENV_FILE", "DSHPATH", "FANOUT", "WCOLL", "PDSH_SSH_ARGS", "PDSH_SSH_ARGS_APPEND", "PDSH_RCMD_TYPE", "PDSH_MODULE_DIR",
                "PDSH_REMOTE_PDCP_PATH", "PDSH_GENDERS_FILE", "PDSH_CONNECT_TIMEOUT", "PDSH_COMMAND_TIMEOUT")  # pdsh(1) ENVIRONMENT, all of it
LAUNCHER_ENV_PREFIXES = ("PDSH_",)  # and any pdsh may read in a later version

# deepspeed also reads ~/.deepspeed_env and ./.deepspeed_env (runner.py DEEPSPEED_ENVIRONMENT_PATHS)
# and pastes each `K=V` line into every node's command as `export K="V"`, unescaped: a line that
# is not a shell name and a value free of $ ` " \ (and of pdsh's %h, %u, %n, %%) stops the launch (only line numbers are
# printed: values may be secrets).
ENV_FILES_CHECK = r"""for flatjob_env_file in "${HOME:-/root}/.deepspeed_env" ./.deepspeed_env; do
  [ -f "$flatjob_env_file" ] || continue
  if [ -n "$(tr -d -c '\r' < "$flatjob_env_file")" ]; then  # Python's readlines splits at a lone CR too, grep does not
    echo "flatjob: $flatjob_env_file holds a carriage return, where deepspeed would split a line grep reads as one; remove it" >&2
    exit 1
  fi
  flatjob_bad=$( (grep -nvE '^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*[[:space:]]*=[^$`"\\]*$' "$flatjob_env_file"; grep -nE '%[hun%]' "$flatjob_env_file") | cut -d: -f1 | sort -nu | tr '\n' ' ')
  if [ -n "$flatjob_bad" ]; then
    echo "flatjob: $flatjob_env_file, line(s) $flatjob_bad: deepspeed would paste them into every node's shell unquoted (a name that is no shell name, or a value with \$, \`, \" or \\), or pdsh would rewrite them (%h, %u, %n, %%); fix or remove them" >&2
    exit 1
  fi
done
"""


def hostfile(pods: list[PodPlan], slots: int) -> str:
    """One `<address> slots=<n>` line per worker, in rank order."""
    return "".join(f"{p.address} slots={slots}\n" for p in pods)


def launch_script(job: DeepSpeedJob, pod: PodPlan, master_addr: str) -> str:
    """worker-0's script: sshd (in the background), wait for peers, then deepspeed."""
    cfg = job.spec.config
    e = elastic_of(job)
    body = [
        scripts.header(job.spec.ssh.auth_mount_path),
        f"# DeepSpeedJob {job.metadata.name}: worker-0 runs deepspeed, which starts the training\n"
        "# processes on every host in the hostfile (this one included) over ssh (pdsh).\n",
        scripts.traps(),
        scripts.client_keys(job.spec.ssh.auth_mount_path),
        sshd.setup(job.spec.ssh.sshd_path, foreground=False, forward_all=ssh.forward_env(job)),
        scripts.wait_for_peers(e.min_replicas if e is not None else None, watch_sshd=True),
    ]
    run_hostfile = '"$FLATJOB_RUN_HOSTFILE"' if e is not None else '"$FLATJOB_HOSTFILE"'
    if cfg.custom_command is not None:
        body.append(
            "# spec.config.customCommand, run as written; its hostfile is $FLATJOB_HOSTFILE_IN_USE.\n"
            f"export FLATJOB_HOSTFILE_IN_USE={run_hostfile}\n"
        )
        launch = f"/bin/sh -c {scripts.quote([cfg.custom_command])}"
    else:
        body.append(
            "# deepspeed puts its NCCL*, PYTHON*... variables into the command it runs on every node,\n"
            "# stripped and in double quotes it does not escape: leave out values that would break,\n"
            "# and deepspeed's and pdsh's own settings (an env file to paste, ssh options): flatjob's.\n"
            + scripts.drop_unquotable("deepspeed", UNQUOTABLE, "every node has them from its own pod", LAUNCHER_ENV)
            + scripts.unset_prefixed(LAUNCHER_ENV_PREFIXES)
            + ENV_FILES_CHECK
            + scripts.plain_directory("deepspeed", scripts.PDSH_FORMATS)
            + "# deepspeed, its flags from spec.config. --master_addr is worker-0's DNS name (else the\n"
            "# runner ssh-es in for `hostname -I`). A child (&, wait), so the traps see SIGTERM.\n"
        )
        body.append(pdsh.SETUP)
        launch = f"{scripts.LAUNCH_ENV}deepspeed --hostfile={run_hostfile} {scripts.quote(deepspeed_args(job, master_addr))}"
    body.append(scripts.background(launch))
    if cfg.custom_command is None:
        body.append(pdsh.CHECK)
    return "".join(body)


def plan_deepspeed(job: DeepSpeedJob, options: CompileOptions) -> JobPlan:
    """Plan the workers of a DeepSpeedJob, their ssh wiring and worker-0's launch."""
    name = job.metadata.name
    lay = layout(job, [("worker", job.spec.worker.replicas, job.spec.worker.template)])
    pods = base_pods(job, lay, name, local=options.local_addresses, block=options.local_block)
    mode = run_mode_name(job.spec.run_mode)
    cm = configmap_name(name)
    files: dict[str, str] = {}
    if pods:
        files = ssh.shared_files(job, hostfile(pods, job.spec.config.slots_per_worker), launch_script(job, pods[0], pods[0].address))
        files[pdsh.WRAPPER] = pdsh.WRAPPER_SH
    mounts = ssh.volume_mounts(job.spec.ssh.auth_mount_path)
    paths = ssh.script_env(job.spec.ssh.auth_mount_path)
    planned = []
    for pod in pods:
        launcher = pod.index == 0
        patch = ssh.sshd_patch(mounts, paths, LAUNCH_SCRIPT if launcher else SSHD_SCRIPT)
        patch, drop, skip = mode_patch(job.spec.run_mode, pod.type, DEBUG_COMMAND, patch)
        patch = ssh.probed_while_serving(patch)
        role, wave = ("launcher", 1) if launcher and mode != "debug" else ("launcher" if launcher else "worker", 0)
        planned.append(replace(pod, patch=patch, volumes=ssh.volumes(job, cm), drop_init_containers=drop, skip_init_on_resume=skip, role=role, wave=wave))
    return ssh.job_plan(job, options, planned, files, mode)
