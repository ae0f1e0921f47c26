"""Plan a ColossalAIJob: workers run sshd; the launcher waits for them, then `colossalai run`.

`colossalai run` ssh-es to every hostfile host, cds into the launcher's working directory
and starts torchrun there with the launcher's environment exported, in double quotes it does
not escape, after the worker's own environment (which session.sh loads).  The launch script
therefore leaves out of it the launcher's per-pod variables, the names the worker template
declares (the worker's own values win) and values those quotes cannot carry.  colossalai
joins the remote command unquoted, so script arguments are passed shell-quoted, after `--`
(else an argument named like one of its options, `--master_port`, would be taken as one).
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from ..jobtypes import ColossalAIJob
from ..options import CompileOptions
from ..podtemplate import containers_of, launch_index
from ..render.configmap import configmap_name
from . import ContainerPatch, JobPlan, PodPlan, scripts, ssh
from .common import address, base_pods, layout, mode_patch, run_mode_name

MASTER_PORT = 29500
LAUNCH_SCRIPT, SSHD_SCRIPT = ssh.LAUNCH_SCRIPT, ssh.SSHD_SCRIPT
# Set per pod (by Kubernetes, by the runtime at release): each worker keeps its own.
PER_POD_VARS = ("HOSTNAME", "FLATJOB_ATTEMPT", "FLATJOB_RESTART_COUNT", "FLATJOB_RESUMING")
# `export K="v"`: a value holding " $ ` or \ would break the remote command or run there.
UNQUOTABLE = '*[\\"\\$\\`\\\\]*'


def extra_items(args: list[str]) -> list[tuple[str, int]]:
    """torchArgs/extraArgs as `--extra_launch_args` items, each with the index of the arg it
    starts at (`--a=1 --b` -> a=1, b; `--max_restarts 3` -> max_restarts=3)."""
    items: list[tuple[str, int]] = []
    for i, a in enumerate(args):
        if a.startswith("-"):
            items.append((a.lstrip("-"), i))
        elif items and "=" not in items[-1][0]:
            items[-1] = (f"{items[-1][0]}={a}", items[-1][1])
        else:
            items.append((a, i))
    return items


def extra_launch_args(args: list[str]) -> str | None:
    """torchArgs/extraArgs as `colossalai run --extra_launch_args` (`--a=1 --b` -> `a=1,b`)."""
    return ",".join(item for item, _ in extra_items(args)) or None


def extra_keys(args: list[str]) -> set[str]:
    """The option names torchArgs/extraArgs set (`--master_port=1` and `--master_port 1`)."""
    return {a.lstrip("-").split("=", 1)[0] for a in args if a.startswith("-")}


def script_words(script: list[str]) -> list[str]:
    """The script (or `-m module`), `--`, then its arguments quoted for the workers' shell:
    colossalai joins the remote command with spaces, unquoted."""
    n = 2 if script[:1] == ["-m"] else 1
    return [*script[:n], "--", *(shlex.quote(a) for a in script[n:])]


def colossalai_args(job: ColossalAIJob, master_addr: str) -> list[str]:
    """`colossalai run` arguments after --hostfile: processes, rendezvous, extra args, script.

    extraArgs that set master_addr or master_port win inside colossalai, so flatjob's own flag
    is left out and the command line shows the value that is used.
    """
    tc = job.spec.torch_config
    assert tc is not None
    own = extra_keys(tc.extra_args)
    argv = [f"--nproc_per_node={tc.proc_per_worker}"]
    if "master_addr" not in own:
        argv.append(f"--master_addr={master_addr}")
    if "master_port" not in own:
        argv.append(f"--master_port={MASTER_PORT}")
    extra = extra_launch_args(tc.extra_args)
    if extra:
        argv.append(f"--extra_launch_args={extra}")
    return argv + script_words(list(tc.script))


def worker_env_names(workers: list[PodPlan]) -> list[str]:
    """Env names the worker template's training container declares (sorted, unique)."""
    found: set[str] = set()
    for p in workers[:1]:
        if p.container is not None:
            env = containers_of(p.template)[p.container].get("env") or []
            found |= {e["name"] for e in env if isinstance(e, dict) and isinstance(e.get("name"), str)}
    return sorted(found)


def hostfile(workers: list[PodPlan]) -> str:
    """ColossalAI's hostfile: one host per line, no slots."""
    return "".join(f"{p.address}\n" for p in workers)


def launcher_unsets(worker_env: list[str]) -> list[str]:
    """The names launch.sh unsets before `colossalai run`, which exports the launcher's whole
    environment to the workers over their own: per-pod values and the worker template's names
    (HOME among them, when the worker template sets it: fabric then reads the passwd home)."""
    return sorted(set(PER_POD_VARS) | set(worker_env))


def launch_script(job: ColossalAIJob, master_addr: str, worker_env: list[str]) -> str:
    """The launcher's script: wait for the workers' sshd, then `colossalai run`."""
    also = launcher_unsets(worker_env)
    return "".join(
        [
            scripts.header(job.spec.ssh.auth_mount_path),
            f"# ColossalAIJob {job.metadata.name}: the launcher runs `colossalai run`, which starts torchrun\n"
            "# on every host in the hostfile over ssh, in this container's working directory.\n",
            scripts.traps(),
            scripts.client_keys(job.spec.ssh.auth_mount_path),
            scripts.wait_for_peers(),
            "# colossalai run exports this whole environment to the workers, over their own, in double\n"
            "# quotes it does not escape: leave out per-pod values, the names the worker template sets\n"
            "# (the worker's values win) and values those quotes cannot carry.\n",
            scripts.drop_unquotable("colossalai run", UNQUOTABLE, "they do not reach the workers (set them on the worker template)", also),
            scripts.plain_directory("colossalai run"),
            "# colossalai run with spec.torchConfig (procPerWorker, extraArgs, script); a child (&, wait)\n"
            "# so the traps see SIGTERM. extraArgs reach torchrun as --extra_launch_args=a=1,b; the\n"
            "# script's arguments are quoted for the workers' shell, after `--`.\n",
            scripts.background(
                f'{scripts.LAUNCH_ENV}colossalai run --hostfile="$FLATJOB_HOSTFILE" {scripts.quote(colossalai_args(job, master_addr))}'
            ),
        ]
    )


def plan_colossalai(job: ColossalAIJob, options: CompileOptions) -> JobPlan:
    """Plan the launcher and workers of a canonical ColossalAIJob."""
    name = job.metadata.name
    specs = job.spec.replica_specs or []
    lay = layout(job, [(r.type, 1 if r.type == "launcher" else r.replicas, r.template) for r in specs])
    pods = base_pods(job, lay, name, local=options.local_addresses, block=options.local_block)
    mode = run_mode_name(job.spec.run_mode)
    workers = [p for p in pods if p.type == "worker"]
    master = workers[0].address if workers else address(f"{name}-worker-0", name)
    cm = configmap_name(name)
    files = ssh.shared_files(job, hostfile(workers), launch_script(job, master, worker_env_names(workers)))
    mounts = ssh.volume_mounts(job.spec.ssh.auth_mount_path)
    paths = ssh.script_env(job.spec.ssh.auth_mount_path)
    planned = []
    for pod in pods:
        launcher = pod.type == "launcher"
        if launcher:
            index = launch_index(job.kind, pod.type, pod.template) or 0
            here = pod.address if options.local_addresses else address(f"{name}-launcher", name)
            pod = replace(pod, name=f"{name}-launcher", address=here, container=index)
            patch = ContainerPatch(command=ssh.script_command(LAUNCH_SCRIPT), args=[], env=paths, volume_mounts=mounts)
        else:
            patch = ssh.sshd_patch(mounts, paths)
        patch, drop, skip = mode_patch(job.spec.run_mode, pod.type, ("sleep", "inf"), patch)
        patch = ssh.probed_while_serving(patch)
        wave = 1 if launcher and mode != "debug" else 0
        planned.append(replace(pod, patch=patch, volumes=ssh.volumes(job, cm), drop_init_containers=drop, skip_init_on_resume=skip, role=pod.type, wave=wave))
    return ssh.job_plan(job, options, planned, files, mode)
